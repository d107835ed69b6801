"""Self-play benchmark: ``python benchmarks/selfplay.py [--games 8 --repeats 3 ...]``.

Plays the same Deal or No Deal self-play games on the embedded SmolLM2 (with the trainer's fresh
LoRA, through ``selfplay.selfplay_agent``, exactly as ``stratagem train selfplay`` plays them)
twice per repeat: batched — every live game's waiting turn in one generation per tick
(``play(max_live=games)``) — and one game at a time (``max_live=1``). Each run gets a fresh
backend (no KV cache from the other). Prints the medians of games, answers and generated tokens
per second, the ratio, and whether both modes wrote the same games (each answer samples with its
own seed, so it may not depend on its batch).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from stratagem.games import get_game
from stratagem.play import play
from stratagem.training.selfplay import SelfPlayArgs, game_specs, selfplay_agent
from stratagem.training.sepo import load_policy


def run(policy, tokenizer, game, args: SelfPlayArgs, max_live: int):
    """Plays one iteration's training games; returns (seconds, traces)."""
    agent = selfplay_agent(policy, tokenizer, game, args, 0)
    specs = game_specs("train", agent, agent, args, 1)
    start = time.perf_counter()
    traces = list(play(game, specs, max_live=max_live))
    return time.perf_counter() - start, sorted(traces, key=lambda t: t.episode_id)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=42)
    cli = parser.parse_args()
    args = SelfPlayArgs(
        games=cli.games,
        max_turns=cli.max_turns,
        max_new_tokens=cli.max_new_tokens,
        temperature=cli.temperature,
        max_live=cli.games,
        seed=cli.seed,
    )
    policy, tokenizer = load_policy(args)  # type: ignore[arg-type]
    game = get_game("dond", max_turns=args.max_turns)
    run(policy, tokenizer, game, SelfPlayArgs(games=1, max_new_tokens=4), 1)  # warm up

    seconds: dict[str, list[float]] = {"batched": [], "one game at a time": []}
    games: dict[str, list] = {}
    for repeat in range(cli.repeats):
        # alternate the order, so a drifting machine load does not favour one mode
        modes = list(seconds) if repeat % 2 == 0 else list(reversed(seconds))
        for mode in modes:
            took, traces = run(policy, tokenizer, game, args, cli.games if mode == "batched" else 1)
            seconds[mode].append(took)
            games[mode] = traces
            print(f"run {repeat + 1}, {mode}: {took:.1f} s", file=sys.stderr)
    answers = sum(len(t.decisions) for t in games["batched"])
    tokens = sum(d.tokens for t in games["batched"] for d in t.decisions)
    same = all(
        [d.text for d in a.decisions] == [d.text for d in b.decisions]
        for a, b in zip(games["batched"], games["one game at a time"], strict=True)
    )
    load = os.getloadavg()[0]
    print(
        f"Deal or No Deal self-play: {cli.games} games of at most {cli.max_turns} turns, "
        f"{answers} answers, {tokens} generated tokens; at most {cli.max_new_tokens} new tokens "
        f"per answer, temperature {cli.temperature}; SmolLM2-135M on CPU ({os.cpu_count()} cores, "
        f"load average {load:.1f}); medians of {cli.repeats} runs"
    )
    print("\n| mode | seconds | games / s | answers / s | tokens / s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for mode, runs in seconds.items():
        s = statistics.median(runs)
        print(f"| {mode} | {s:.1f} | {cli.games / s:.3f} | {answers / s:.2f} | {tokens / s:.1f} |")
    ratio = statistics.median(seconds["one game at a time"]) / statistics.median(seconds["batched"])
    print(f"\nbatched / one game at a time: {ratio:.2f}× games per second; same games: {same}")


if __name__ == "__main__":
    main()
