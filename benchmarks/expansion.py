"""Dialogue-tree expansion benchmark: ``python benchmarks/expansion.py [--replies 2 ...]``.

Expands the same fruit-trading trees on the embedded SmolLM2 twice, cold (no response cache):
breadth first with one batched backend call per depth (``solvers.dialogue.expand``), and one
message at a time (one backend call per message, same order, same seeds). Prints messages per
second for both, per wall-clock and per CPU second of this process (medians of ``--repeats``
cold runs, alternating; on a shared machine the CPU seconds are the steadier measure), their
ratio, and how many messages the two wrote differently (per-row seeded sampling makes a message
depend on its chat and seed, but the batch shape changes the logits in their last bits, which a
token can follow, and a changed message changes every message below it). Prints the torch
thread count and the load average it ran under.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from stratagem.backends.base import Sampling
from stratagem.backends.cache import CachedBackend
from stratagem.backends.hf import HFBackend
from stratagem.games.dialogue import get_domain
from stratagem.solvers.dialogue import DialogueTree, expand


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
    parser.add_argument("--repeats", type=int, default=3, help="cold runs of each; medians")
    args = parser.parse_args()
    model = HFBackend("embedded")
    model.generate([[{"role": "user", "content": "Hi"}]], Sampling(0.0, 1.0, 4))  # warm up

    wall: dict[str, list[float]] = {"batched": [], "single": []}
    cpu: dict[str, list[float]] = {"batched": [], "single": []}
    differ = []  # messages the two expansions wrote differently, per repeat
    for _ in range(args.repeats):  # alternating, each cold: a fresh cache, no prompt KV kept
        model.reset_prefix_cache()
        batched = trees(CachedBackend(model), args)
        start, start_cpu = time.perf_counter(), time.process_time()
        stats = expand(batched)
        wall["batched"].append(time.perf_counter() - start)
        cpu["batched"].append(time.process_time() - start_cpu)
        model.reset_prefix_cache()  # neither run may reuse the other's prompt KV

        single = trees(CachedBackend(model), args)
        start, start_cpu = time.perf_counter(), time.process_time()
        one_at_a_time(single)
        wall["single"].append(time.perf_counter() - start)
        cpu["single"].append(time.process_time() - start_cpu)
        calls = single[0].backend.usage.calls  # repeated (chat, seed) pairs come from the cache
        differ.append(
            sum(
                a.history.get(path) != b.history.get(path)
                for a, b in zip(batched, single, strict=True)
                for path in set(a.history) | set(b.history)
                if path
            )
        )

    n = stats.generated
    med = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in wall}
    print(
        f"fruit trees: {args.scenarios} scenario(s) × {args.replies} replies × "
        f"{len(args.instructions.split(','))} instructions × {args.seeds} seed(s); "
        f"max {args.max_new_tokens} new tokens; SmolLM2-135M on CPU, "
        f"{torch.get_num_threads()} torch thread(s); medians of {args.repeats} cold runs; "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        "\n| expansion | messages | backend calls | wall s | CPU s | messages / wall s "
        "| messages / CPU s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, key, count in (
        ("batched per depth", "batched", stats.model_calls),
        ("one node at a time", "single", calls),
    ):
        w, c = med[key]
        print(f"| {name} | {n} | {count} | {w:.1f} | {c:.1f} | {n / w:.3f} | {n / c:.3f} |")
    print(
        f"\nbatched / one at a time: {med['single'][0] / med['batched'][0]:.2f}× messages per "
        f"wall second, {med['single'][1] / med['batched'][1]:.2f}× per CPU second; paths whose "
        f"message differs between the two (of {n}, per run): {differ}"
    )
    for key in wall:
        runs = ", ".join(f"{w:.1f}/{c:.1f}" for w, c in zip(wall[key], cpu[key], strict=True))
        print(f"{key} runs (wall/CPU s): {runs}")


if __name__ == "__main__":
    main()
