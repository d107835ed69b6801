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

With ``--partner-games P`` it compares instead an iteration's two phases — the self-play games
and P games with FairSplit (``train selfplay --partner-games``) — played in one ``play`` call
(``selfplay.data.play_groups``, what the trainer does: the partner games fill the batch while
self-play games end) and one phase after the other (``play_games`` per phase), both batched up to
all G + P games.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from stratagem.games import get_game
from stratagem.play import play
from stratagem.strategies import get_strategy
from stratagem.training.policy import load_policy
from stratagem.training.selfplay.data import play_games, play_groups
from stratagem.training.selfplay.trainer import SelfPlayArgs, game_specs, selfplay_agent

BATCHING = ("batched", "one game at a time")
PHASES = ("phases in one call", "one phase after the other")


def run(policy, tokenizer, game, args: SelfPlayArgs, max_live: int):
    """Plays one iteration's training games; returns (wall seconds, CPU seconds, traces)."""
    agent = selfplay_agent(policy, tokenizer, game, args, 0)
    specs = game_specs("train", agent, agent, args, 1)
    wall, cpu = time.perf_counter(), time.process_time()
    traces = list(play(game, specs, max_live=max_live))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, sorted(traces, key=lambda t: t.episode_id)


def run_phases(policy, tokenizer, game, args: SelfPlayArgs, together: bool):
    """Plays one iteration's self-play and FairSplit games, both phases in one call or one after
    the other, into a fresh trace file; returns (wall seconds, CPU seconds, traces)."""
    agent = selfplay_agent(policy, tokenizer, game, args, 0)
    fair = get_strategy("dond", "FairSplit")
    groups = [
        game_specs("train", agent, agent, args, 1),
        game_specs("partner", agent, fair, args, 1),
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "games.jsonl"
        wall, cpu = time.perf_counter(), time.process_time()
        if together:
            played = play_groups(game, groups, [path] * len(groups), "bench", args.max_live)
        else:
            played = [play_games(game, g, path, "bench", args.max_live) for g in groups]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, [t for g in played for t in g]


def ratio(runs: dict[str, list[float]], modes: tuple[str, str]) -> float:
    """Median seconds of the second mode over median seconds of the first."""
    return statistics.median(runs[modes[1]]) / statistics.median(runs[modes[0]])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument(
        "--partner-games", type=int, default=0, help="Compare phases in one call instead."
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--adapter", help="A warm-start adapter (its games last longer).")
    cli = parser.parse_args()
    args = SelfPlayArgs(
        games=cli.games,
        partner_games=cli.partner_games,
        max_turns=cli.max_turns,
        max_new_tokens=cli.max_new_tokens,
        temperature=cli.temperature,
        max_live=cli.games + cli.partner_games,
        seed=cli.seed,
        adapter=cli.adapter,
    )
    policy, tokenizer = load_policy(args)  # type: ignore[arg-type]
    game = get_game("dond", max_turns=args.max_turns)
    run(policy, tokenizer, game, SelfPlayArgs(games=1, max_new_tokens=4), 1)  # warm up

    modes = PHASES if cli.partner_games else BATCHING
    wall: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}
    games: dict[str, list] = {}
    for repeat in range(cli.repeats):
        # alternate the order, so a drifting machine load does not favour one mode
        for mode in modes if repeat % 2 == 0 else reversed(modes):
            if cli.partner_games:
                measured = run_phases(policy, tokenizer, game, args, mode == PHASES[0])
            else:
                max_live = cli.games if mode == BATCHING[0] else 1
                measured = run(policy, tokenizer, game, args, max_live)
            seconds, cpu_seconds, games[mode] = measured
            wall[mode].append(seconds)
            cpu[mode].append(cpu_seconds)
            print(
                f"run {repeat + 1}, {mode}: {seconds:.1f} s, {cpu_seconds:.1f} CPU s",
                file=sys.stderr,
            )

    first = games[modes[0]]
    n = cli.games + cli.partner_games
    answers = sum(len(t.decisions) for t in first)
    tokens = sum(d.tokens for t in first for d in t.decisions)
    same = all(
        [d.text for d in a.decisions] == [d.text for d in b.decisions]
        for a, b in zip(first, games[modes[1]], strict=True)
    )
    partners = f" and {cli.partner_games} with FairSplit" if cli.partner_games else ""
    print(
        f"Deal or No Deal self-play: {cli.games} games{partners} of at most {cli.max_turns} "
        f"turns, {answers} answers, {tokens} generated tokens; at most {cli.max_new_tokens} new "
        f"tokens per answer, temperature {cli.temperature}; SmolLM2-135M"
        f"{' + ' + cli.adapter if cli.adapter else ''} on CPU ({os.cpu_count()} "
        f"cores, load average {os.getloadavg()[0]:.1f}); medians of {cli.repeats} runs"
    )
    print("\n| mode | seconds | CPU seconds | games / s | answers / s | tokens / s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for mode in modes:
        s, c = statistics.median(wall[mode]), statistics.median(cpu[mode])
        print(
            f"| {mode} | {s:.1f} | {c:.1f} | {n / s:.3f} | {answers / s:.2f} | {tokens / s:.1f} |"
        )
    print(
        f"\n{modes[0]} / {modes[1]}: {ratio(wall, modes):.2f}× games per second "
        f"({ratio(cpu, modes):.2f}× per CPU second); same games: {same}"
    )


if __name__ == "__main__":
    main()
