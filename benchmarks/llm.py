"""LLM rollout benchmarks on the embedded SmolLM2: ``python benchmarks/llm.py``.

1. Batched vs one-episode-at-a-time rollout at 1, 4, 16, 64 concurrent episodes (negotiation v1,
   4 rounds, greedy, 16 new tokens at most): decisions/s, generated tokens/s and their ratio.
   One-at-a-time throughput does not depend on how many episodes wait, so it is measured once.
2. Rollout throughput vs one raw batched ``model.generate`` call on the same first-round prompts
   (plain left padding, no stopping, no prefix reuse) at the same batch size.
3. Prefill tokens per decision by round (IPD, 8 rounds) with and without prefix reuse.
Everything is measured side by side in this one process.
"""

from __future__ import annotations

import statistics
import time

import torch

from stratagem.agents.llm import LLMAgent, chat_for
from stratagem.backends.base import Sampling
from stratagem.backends.hf import HFBackend
from stratagem.games import get_game
from stratagem.play import EpisodeSpec, play
from stratagem.strategies import get_strategy

SAMPLING = Sampling(max_new_tokens=16)


def rollout(backend, game_name, n, max_live, opponent, reuse=True, stop=True):
    backend.prefix_reuse = reuse
    backend.reset_prefix_cache()
    game = get_game(game_name)
    agent = LLMAgent(backend, game, SAMPLING, stop_on_action=stop)
    specs = [
        EpisodeSpec(str(i), i, (agent, get_strategy(game_name, opponent)), {"seat": 0})
        for i in range(n)
    ]
    start = time.perf_counter()
    traces = list(play(game, specs, max_live=max_live))
    seconds = time.perf_counter() - start
    decisions = [d for t in traces for d in t.decisions if d.seat == 0]
    return traces, seconds, len(decisions), sum(d.tokens for d in decisions)


def raw_generate(backend, n):
    game = get_game("negotiation")
    chats = [chat_for(game.new_episode(i).observe(0)) for i in range(n)]
    prompts = [backend.render(c) for c in chats]
    enc = backend.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    start = time.perf_counter()
    with torch.inference_mode():
        out = backend.model.generate(
            **enc,
            max_new_tokens=SAMPLING.max_new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            pad_token_id=backend.tokenizer.pad_token_id,
        )
    seconds = time.perf_counter() - start
    new = out[:, enc.input_ids.shape[1] :]
    tokens = int((new != backend.tokenizer.pad_token_id).sum())
    return n / seconds, tokens / seconds


def main() -> None:
    backend = HFBackend()
    print(f"embedded SmolLM2-135M-Instruct · {backend.dtype} · {torch.get_num_threads()} threads")
    rollout(backend, "negotiation", 2, 2, "FairSplit")  # warm-up

    batched = {}
    for stop in (False, True):
        _, s_seq, d_seq, t_seq = rollout(backend, "negotiation", 4, 1, "FairSplit", stop=stop)
        seq_rate, seq_tok = d_seq / s_seq, t_seq / s_seq
        title = (
            "stopping at the action (SPEC §4.1)"
            if stop
            else "equal work: every decision generates 16 tokens"
        )
        print(f"\n{title}\n")
        print(
            "| concurrent episodes | batched decisions/s | tokens/s | one-at-a-time "
            "decisions/s | tokens/s | batched ÷ one-at-a-time |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in (1, 4, 16, 64):
            _, s, d, t = rollout(backend, "negotiation", n, n, "FairSplit", stop=stop)
            batched[(stop, n)] = d / s
            print(
                f"| {n} | {d / s:.2f} | {t / s:.1f} | {seq_rate:.2f} | {seq_tok:.1f} | "
                f"{(d / s) / seq_rate:.1f}× |"
            )

    print(
        "\n| batch | rollout decisions/s (16 tokens each) | raw generate decisions/s "
        "| rollout ÷ raw |"
    )
    print("| ---: | ---: | ---: | ---: |")
    for n in (16, 64):
        raw = statistics.median(raw_generate(backend, n)[0] for _ in range(2))
        rate = batched[(False, n)]
        print(f"| {n} | {rate:.2f} | {raw:.2f} | {rate / raw:.0%} |")

    print("\n| IPD round | prefill tokens / decision, no reuse | with prefix reuse |")
    print("| ---: | ---: | ---: |")
    per_round = {}
    for reuse in (False, True):
        traces, *_ = rollout(backend, "ipd", 8, 8, "TitForTat", reuse=reuse)
        for t in traces:
            for d in t.decisions:
                if d.seat == 0:
                    per_round.setdefault((reuse, d.round), []).append(d.info["prefill_tokens"])
    for r in range(8):
        plain = statistics.mean(per_round[(False, r)])
        reused = statistics.mean(per_round[(True, r)])
        print(f"| {r + 1} | {plain:.0f} | {reused:.0f} |")


if __name__ == "__main__":
    main()
