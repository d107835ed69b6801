"""Dialogue-tree expansion benchmark: ``python benchmarks/expansion.py [--replies 2 ...]``.

Expands the same fruit-trading trees on the embedded SmolLM2 twice, cold (no response cache):
breadth first with one batched backend call per depth (``solvers.expand.expand``), and one
message at a time (one backend call per message, same order, same seeds). Prints messages per
second for both and their ratio, and checks that both wrote the same messages (per-row seeded
sampling: a message depends on its chat and seed only, not on its batch).
"""

from __future__ import annotations

import argparse
import time

from stratagem.backends.base import Sampling
from stratagem.backends.hf import HFBackend
from stratagem.games.dialogue import get_domain
from stratagem.solvers.expand import CachedBackend, DialogueTree, expand


def trees(backend, args) -> list[DialogueTree]:
    domain = get_domain("fruit", args.instructions.split(","))
    sampling = Sampling(0.8, 0.95, args.max_new_tokens)
    return [
        DialogueTree(
            domain,
            domain.scenario(s),
            backend,
            replies=args.replies,
            seeds=args.seeds,
            sampling=sampling,
        )
        for s in range(args.scenarios)
    ]


def one_at_a_time(forest: list[DialogueTree]) -> None:
    """Expands ``forest`` depth by depth but sends every message as its own backend call."""
    for depth in range(forest[0].replies):
        for tree in forest:
            requests = tree.requests(depth)
            texts = []
            for _, _, _, chat, seed in requests:
                rule = tree.domain.stop
                gen = tree.backend.generate(
                    [chat],
                    tree.sampling,
                    seeds=[seed],
                    stop=[rule],
                    stop_key=f"{tree.domain.name}-v{tree.domain.version}",
                )
                texts.append(gen[0].text)
            tree.accept(depth, requests, texts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=1)
    parser.add_argument("--replies", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--instructions", default="calm,assertive,any")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    model = HFBackend("embedded")
    model.generate([[{"role": "user", "content": "Hi"}]], Sampling(0.0, 1.0, 4))  # warm up

    batched = trees(CachedBackend(model), args)
    start = time.perf_counter()
    stats = expand(batched)
    t_batched = time.perf_counter() - start
    model.reset_prefix_cache()  # neither run may reuse the other's prompt KV

    single = trees(CachedBackend(model), args)
    start = time.perf_counter()
    one_at_a_time(single)
    t_single = time.perf_counter() - start
    calls = single[0].backend.usage.calls  # repeated (chat, seed) pairs come from the cache

    same = all(a.history == b.history for a, b in zip(batched, single, strict=True))
    n = stats.generated
    print(
        f"fruit trees: {args.scenarios} scenario(s) × {args.replies} replies × "
        f"{len(args.instructions.split(','))} instructions × {args.seeds} seed(s); "
        f"max {args.max_new_tokens} new tokens; SmolLM2-135M on CPU"
    )
    print("\n| expansion | messages | backend calls | seconds | messages / s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(
        f"| batched per depth | {n} | {stats.model_calls} | {t_batched:.1f} | {n / t_batched:.2f} |"
    )
    print(f"| one node at a time | {n} | {calls} | {t_single:.1f} | {n / t_single:.2f} |")
    print(
        f"\nbatched / one at a time: {t_single / t_batched:.2f}× messages per second; "
        f"same messages: {same}"
    )


if __name__ == "__main__":
    main()
