"""Self-play benchmark: ``python benchmarks/selfplay.py [--games 4 --repeats 3 ...]``.

Plays the same Deal or No Deal self-play games on the embedded SmolLM2 (with the trainer's fresh
LoRA, through ``selfplay.selfplay_agent``, exactly as ``stratagem train selfplay`` plays them)
twice per repeat: batched — every live game's waiting turn in one generation per tick
(``play(max_live=games)``) — and one game at a time (``max_live=1``). Each run gets a fresh
backend (no KV cache from the other), and the two modes alternate which goes first. Prints the
medians of wall and CPU seconds, of games, answers and generated tokens per second, the ratios,
and whether both modes wrote the same games (each answer samples with its own seed, so it may not
depend on its batch). On a machine shared with other work the CPU seconds are the steadier
measure; the load average is printed with the table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from stratagem.games import get_game
from stratagem.play import play
from stratagem.training.policy import load_policy
from stratagem.training.selfplay import SelfPlayArgs, game_specs, selfplay_agent

MODES = ("batched", "one game at a time")


def run(policy, tokenizer, game, args: SelfPlayArgs, max_live: int):
    """Plays one iteration's training games; returns (wall seconds, CPU seconds, traces)."""
    agent = selfplay_agent(policy, tokenizer, game, args, 0)
    specs = game_specs("train", agent, agent, args, 1)
    wall, cpu = time.perf_counter(), time.process_time()
    traces = list(play(game, specs, max_live=max_live))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, sorted(traces, key=lambda t: t.episode_id)


def ratio(runs: dict[str, list[float]]) -> float:
    """Median seconds one game at a time over median seconds batched."""
    return statistics.median(runs[MODES[1]]) / statistics.median(runs[MODES[0]])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--adapter", help="A warm-start adapter (its games last longer).")
    cli = parser.parse_args()
    args = SelfPlayArgs(
        games=cli.games,
        max_turns=cli.max_turns,
        max_new_tokens=cli.max_new_tokens,
        temperature=cli.temperature,
        max_live=cli.games,
        seed=cli.seed,
        adapter=cli.adapter,
    )
    policy, tokenizer = load_policy(args)  # type: ignore[arg-type]
    game = get_game("dond", max_turns=args.max_turns)
    run(policy, tokenizer, game, SelfPlayArgs(games=1, max_new_tokens=4), 1)  # warm up

    wall: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    games: dict[str, list] = {}
    for repeat in range(cli.repeats):
        # alternate the order, so a drifting machine load does not favour one mode
        for mode in MODES if repeat % 2 == 0 else reversed(MODES):
            max_live = cli.games if mode == MODES[0] else 1
            seconds, cpu_seconds, games[mode] = run(policy, tokenizer, game, args, max_live)
            wall[mode].append(seconds)
            cpu[mode].append(cpu_seconds)
            print(
                f"run {repeat + 1}, {mode}: {seconds:.1f} s, {cpu_seconds:.1f} CPU s",
                file=sys.stderr,
            )

    batched = games[MODES[0]]
    answers = sum(len(t.decisions) for t in batched)
    tokens = sum(d.tokens for t in batched for d in t.decisions)
    same = all(
        [d.text for d in a.decisions] == [d.text for d in b.decisions]
        for a, b in zip(batched, games[MODES[1]], strict=True)
    )
    print(
        f"Deal or No Deal self-play: {cli.games} games of at most {cli.max_turns} turns, "
        f"{answers} answers, {tokens} generated tokens; at most {cli.max_new_tokens} new tokens "
        f"per answer, temperature {cli.temperature}; SmolLM2-135M"
        f"{' + ' + cli.adapter if cli.adapter else ''} on CPU ({os.cpu_count()} "
        f"cores, load average {os.getloadavg()[0]:.1f}); medians of {cli.repeats} runs"
    )
    print("\n| mode | seconds | CPU seconds | games / s | answers / s | tokens / s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for mode in MODES:
        s, c = statistics.median(wall[mode]), statistics.median(cpu[mode])
        print(
            f"| {mode} | {s:.1f} | {c:.1f} | {cli.games / s:.3f} | {answers / s:.2f} "
            f"| {tokens / s:.1f} |"
        )
    print(
        f"\nbatched / one game at a time: {ratio(wall):.2f}× games per second "
        f"({ratio(cpu):.2f}× per CPU second); same games: {same}"
    )


if __name__ == "__main__":
    main()
