"""Memory of one self-play iteration with and without ``release_memory`` between its phases:
``python benchmarks/selfplay_memory.py [--games 16 --repeats 1 --adapter DIR]``.

Each run is a fresh process that loads the embedded SmolLM2 (plus ``--adapter``), plays
``--games`` Deal or No Deal self-play games as ``stratagem train selfplay`` plays them (one
batched generation per tick), drops the games' agent, then fine-tunes on the seats above the mean
(``kept_seats`` and ``fine_tune``, one epoch). ``release`` calls
``training.memory.release_memory`` after the games and after the SFT, as the trainer does;
``keep`` does not; ``release + checkpointing`` also fine-tunes with ``--gradient-checkpointing``.
It reports the resident memory after the games, after the release, the peak resident memory of
the fine-tuning alone (the peak is reset through ``/proc/self/clear_refs`` before it starts) and
what stays resident after it, into the evaluation games that follow.
The modes take turns going first. Linux only (``/proc``). Prints medians and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODES = ("keep", "release", "release + checkpointing")

CHILD = """
import json, sys, time
from pathlib import Path
from stratagem.training.memory import release_memory
from stratagem.training.policy import load_policy
from stratagem.training.selfplay.trainer import SelfPlayArgs, fine_tune, game_specs, selfplay_agent
from stratagem.training.selfplay.args import dond_game
from stratagem.training.selfplay.data import kept_seats, play_games, sft_rows

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 2**20  # kB -> GiB

mode, games, adapter, out = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None, Path(sys.argv[4])
args = SelfPlayArgs(games=games, max_turns=6, max_new_tokens=80, temperature=0.5, lam=1.0,
                    max_live=64, epochs=1, batch_size=4, adapter=adapter, out=out,
                    gradient_checkpointing=mode.endswith("checkpointing"))
game = dond_game(args)
policy, tokenizer = load_policy(args)
result = {"loaded": status("VmRSS")}
start = time.perf_counter()
agent = selfplay_agent(policy, tokenizer, game, args, 0)
specs = game_specs("train", agent, agent, args, 1)
traces = play_games(game, specs, out / "games.jsonl", "bench", args.max_live)
del agent, specs
result["play_seconds"] = time.perf_counter() - start
result["after_games"] = status("VmRSS")
if mode != "keep":
    release_memory()
result["before_sft"] = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # the peak from here on
rows = sft_rows(tokenizer, kept_seats(traces, args.lam), args.max_length)
start = time.perf_counter()
fine_tune(policy, tokenizer, rows, args, 1)
result["sft_seconds"] = time.perf_counter() - start
result["sft_peak"] = status("VmHWM")
if mode != "keep":
    release_memory()
result["after_sft"] = status("VmRSS")  # held through the evaluation games that follow
result["rows"] = len(rows)
print("RESULT", json.dumps(result), file=sys.stderr)
"""


def run(mode: str, cli) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(cli.games), cli.adapter or "", tmp],
            capture_output=True,
            text=True,
        )
    lines = [x for x in r.stderr.splitlines() if x.startswith("RESULT ")]
    if r.returncode or not lines:
        sys.exit(f"the {mode} run failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--adapter", help="A warm-start adapter (its games last longer).")
    cli = parser.parse_args()
    results: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for repeat in range(cli.repeats):
        for mode in MODES if repeat % 2 == 0 else reversed(MODES):
            results[mode].append(run(mode, cli))
            print(f"run {repeat + 1}, {mode}: {results[mode][-1]}", file=sys.stderr)

    def median(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in results[mode])

    print(
        f"Deal or No Deal self-play iteration: {cli.games} games (at most 6 turns, 80 new tokens, "
        f"temperature 0.5), then one epoch of SFT on the seats above the mean; SmolLM2-135M"
        f"{' + ' + cli.adapter if cli.adapter else ''} on CPU ({os.cpu_count()} cores, load "
        f"average {os.getloadavg()[0]:.1f}); medians of {cli.repeats} runs per mode; GiB resident"
    )
    print(
        "\n| mode | loaded | after the games | before the SFT | SFT peak | after the SFT "
        "| SFT seconds | SFT rows |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode in MODES:
        print(
            f"| {mode} | {median(mode, 'loaded'):.2f} | {median(mode, 'after_games'):.2f} | "
            f"{median(mode, 'before_sft'):.2f} | {median(mode, 'sft_peak'):.2f} | "
            f"{median(mode, 'after_sft'):.2f} | {median(mode, 'sft_seconds'):.0f} | "
            f"{median(mode, 'rows'):.0f} |"
        )
    print()
    for key in ("before_sft", "sft_peak", "after_sft", "sft_seconds"):
        ratios = ", ".join(
            f"{mode} {median('keep', key) / median(mode, key):.2f}×" for mode in MODES[1:]
        )
        print(f"keep / mode, {key.replace('_', ' ')}: {ratios}")


if __name__ == "__main__":
    main()
