"""An iteration's phases in one call or one after the other:
``python benchmarks/selfplay_phases.py [--games 8 --partner-games 8 --repeats 3 ...]``.

Plays one self-play iteration's games on the embedded SmolLM2 (with the trainer's fresh LoRA,
through ``selfplay.selfplay_agent``, as ``stratagem train selfplay --partner-games P`` plays
them) — G self-play games and P games with FairSplit — twice per repeat: both phases in one
``play`` call (``selfplay_data.play_groups``, what the trainer does), so that the partner games
fill the batch while self-play games end, and one phase after the other (``play_games`` per
phase, the trainer before), each batched up to ``--max-live`` (default G + P). Each run gets a
fresh backend and trace file, and the two modes alternate which goes first. Prints the medians of
wall and CPU seconds and of games and generated tokens per second, the ratio, and whether both
modes wrote the same games (each answer samples with its own seed).
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
from stratagem.strategies import get_strategy
from stratagem.training.policy import load_policy
from stratagem.training.selfplay import SelfPlayArgs, game_specs, selfplay_agent
from stratagem.training.selfplay_data import play_games, play_groups

MODES = ("phases in one call", "one phase after the other")


def run(policy, tokenizer, game, args: SelfPlayArgs, together: bool, folder: Path):
    """Plays one iteration's self-play and partner games; returns (wall s, CPU s, traces)."""
    agent = selfplay_agent(policy, tokenizer, game, args, 0)
    partner = get_strategy("dond", "FairSplit")
    groups = [
        game_specs("train", agent, agent, args, 1),
        game_specs("partner", agent, partner, args, 1),
    ]
    path = Path(tempfile.mkdtemp(dir=folder)) / "games.jsonl"
    wall, cpu = time.perf_counter(), time.process_time()
    if together:
        traces = play_groups(game, groups, path, "bench", args.max_live)
    else:
        traces = [play_games(game, g, path, "bench", args.max_live) for g in groups]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, [t for g in traces for t in g]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--partner-games", type=int, default=8)
    parser.add_argument("--max-live", type=int, help="Games in flight (default: all of them).")
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
        max_live=cli.max_live or cli.games + cli.partner_games,
        seed=cli.seed,
        adapter=cli.adapter,
    )
    policy, tokenizer = load_policy(args)  # type: ignore[arg-type]
    game = get_game("dond", max_turns=args.max_turns)
    wall: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    games: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as folder:
        warm = SelfPlayArgs(games=1, partner_games=1, max_new_tokens=4)
        run(policy, tokenizer, game, warm, True, Path(folder))
        for repeat in range(cli.repeats):
            # alternate the order, so a drifting machine load does not favour one mode
            for mode in MODES if repeat % 2 == 0 else reversed(MODES):
                together = mode == MODES[0]
                seconds, cpu_seconds, games[mode] = run(
                    policy, tokenizer, game, args, together, Path(folder)
                )
                wall[mode].append(seconds)
                cpu[mode].append(cpu_seconds)
                print(
                    f"run {repeat + 1}, {mode}: {seconds:.1f} s, {cpu_seconds:.1f} CPU s",
                    file=sys.stderr,
                )

    played = games[MODES[0]]
    tokens = sum(d.tokens for t in played for d in t.decisions)
    same = all(
        [d.text for d in a.decisions] == [d.text for d in b.decisions]
        for a, b in zip(played, games[MODES[1]], strict=True)
    )
    n = cli.games + cli.partner_games
    print(
        f"Deal or No Deal, one self-play iteration: {cli.games} self-play games and "
        f"{cli.partner_games} with FairSplit, at most {cli.max_turns} turns, {args.max_live} in "
        f"flight, {tokens} generated tokens; at most {cli.max_new_tokens} new tokens per answer, "
        f"temperature {cli.temperature}; SmolLM2-135M"
        f"{' + ' + cli.adapter if cli.adapter else ''} on CPU ({os.cpu_count()} cores, load "
        f"average {os.getloadavg()[0]:.1f}); medians of {cli.repeats} runs"
    )
    print("\n| mode | seconds | CPU seconds | games / s | tokens / s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for mode in MODES:
        s, c = statistics.median(wall[mode]), statistics.median(cpu[mode])
        print(f"| {mode} | {s:.1f} | {c:.1f} | {n / s:.3f} | {tokens / s:.1f} |")
    ratio = statistics.median(wall[MODES[1]]) / statistics.median(wall[MODES[0]])
    cpu_ratio = statistics.median(cpu[MODES[1]]) / statistics.median(cpu[MODES[0]])
    print(
        f"\none call / one phase after the other: {ratio:.2f}× games per second "
        f"({cpu_ratio:.2f}× per CPU second); same games: {same}"
    )


if __name__ == "__main__":
    main()
