"""Rule-based engine benchmarks: ``python benchmarks/run.py`` (or ``make bench``).

Prints medians of repeated runs and ratios measured side by side in the same process:
rounds per second per game, the wall time of a full five-game SEPO evaluation, and the overhead
of writing a resumable run folder and of resuming a finished one.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from stratagem.evaluation.pools import evaluate
from stratagem.games import get_game
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies import get_pools, get_strategy

REPEATS = 5
AGENT = {
    "ipd": "TitForTat",
    "auction": "Truthful",
    "negotiation": "FairSplit",
    "multi_issue": "FairNeg",
    "kuhn": "NashApprox",
}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_time(fn, repeats: int = REPEATS) -> float:
    return statistics.median(timed(fn) for _ in range(repeats))


def rounds_per_second(name: str, episodes: int = 2000) -> float:
    game = get_game(name)
    pools = get_pools(name)
    a, b = get_strategy(name, pools.train[0]), get_strategy(name, pools.exploit[0])

    def run():
        specs = (EpisodeSpec(str(i), derive(1, i), (a, b)) for i in range(episodes))
        for _ in play(game, specs):
            pass

    return episodes * game.rounds / median_time(run)


def five_game_eval(out: Path | None = None) -> None:
    for name in AGENT:
        game = get_game(name)
        evaluate(
            game,
            get_strategy(name, AGENT[name]),
            episodes=20,
            out=None if out is None else out / name,
        )


def main() -> None:
    print(
        f"stratagem rule-based benchmarks · python {sys.version.split()[0]} · median of {REPEATS}"
    )
    print("\n| game | rounds / s |\n| --- | ---: |")
    for name in AGENT:  # the five SEPO games; bargaining has benchmarks/bargaining.py
        print(f"| {name} | {rounds_per_second(name):,.0f} |")

    in_memory = median_time(five_game_eval)
    with tempfile.TemporaryDirectory() as tmp:
        fresh_times, resume_times = [], []
        for i in range(REPEATS):
            folder = Path(tmp) / str(i)
            fresh_times.append(timed(lambda f=folder: five_game_eval(f)))
            resume_times.append(timed(lambda f=folder: five_game_eval(f)))
    fresh, resumed = statistics.median(fresh_times), statistics.median(resume_times)
    print("\n| five-game SEPO evaluation (all pools, 20 episodes per opponent) | seconds | ratio |")
    print("| --- | ---: | ---: |")
    print(f"| in memory | {in_memory:.3f} | 1.00 |")
    print(
        f"| with run folder (traces, metrics, manifest) | {fresh:.3f} | {fresh / in_memory:.2f} |"
    )
    print(
        f"| resume of the finished run (nothing to play) | {resumed:.3f} | "
        f"{resumed / in_memory:.2f} |"
    )


if __name__ == "__main__":
    main()
