"""CFR+ speed against OpenSpiel: ``python benchmarks/solvers.py`` (or ``make bench``).

Time to exploitability 1e-3 on Kuhn and Leduc poker for stratagem's vectorised CFR+, OpenSpiel's
C++ ``pyspiel.CFRPlusSolver`` and OpenSpiel's Python ``CFRPlusSolver``, all in one process.

For each solver, the iteration count N at which the average policy's exploitability first drops
below 1e-3 is found first (each solver with its own exploitability: stratagem's flat best
response, pyspiel's C++ one; the Python solver's N is the C++ one, since the two are bit-identical,
and its exploitability is checked at N - 1 and N). Then N iterations are timed from a fresh
solver, setup excluded and reported apart; each time is the median of up to ``--repeats`` runs,
stopping early once a solver has spent ``--budget`` seconds. Ratios are OpenSpiel's time over
stratagem's (above 1: stratagem is faster).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from stratagem.games import kuhn, leduc
from stratagem.solvers.cfr import CFR_PLUS, CFRSolver
from stratagem.solvers.tree import flatten

TARGET = 1e-3
GAMES = {"kuhn": ("kuhn_poker", kuhn.game_tree), "leduc": ("leduc_poker", leduc.game_tree)}


@dataclass(frozen=True)
class Timing:
    solver: str
    iterations: int
    setup_seconds: float
    seconds: float  # median over runs, iterations only
    runs: int


def median_runs(run: Callable[[], float], repeats: int, budget: float) -> tuple[float, int]:
    """Median of ``run()`` (which returns seconds) over up to ``repeats`` runs within ``budget``."""
    times: list[float] = []
    spent = 0.0
    while len(times) < repeats and (not times or spent < budget):
        times.append(run())
        spent += times[-1]
    return statistics.median(times), len(times)


def ours(game: str, repeats: int, budget: float) -> Timing:
    build = GAMES[game][1]
    solver = CFRSolver(build(), CFR_PLUS)
    while True:
        solver.iterate(1)
        if solver.exploitability() < TARGET:
            break
    n = solver.iteration

    def setup() -> CFRSolver:
        return CFRSolver(flatten(build()), CFR_PLUS)

    start = time.perf_counter()
    setup()
    setup_seconds = time.perf_counter() - start

    def run() -> float:
        fresh = setup()
        start = time.perf_counter()
        fresh.iterate(n)
        return time.perf_counter() - start

    seconds, runs = median_runs(run, repeats, budget)
    return Timing("stratagem CFR+ (numpy)", n, setup_seconds, seconds, runs)


def openspiel_cpp(game: str, repeats: int, budget: float) -> Timing:
    import pyspiel

    os_game = pyspiel.load_game(GAMES[game][0])
    solver = pyspiel.CFRPlusSolver(os_game)
    n = 0
    while True:
        solver.evaluate_and_update_policy()
        n += 1
        if pyspiel.exploitability(os_game, solver.average_policy()) < TARGET:
            break
    start = time.perf_counter()
    pyspiel.CFRPlusSolver(os_game)
    setup_seconds = time.perf_counter() - start

    def run() -> float:
        fresh = pyspiel.CFRPlusSolver(os_game)
        start = time.perf_counter()
        for _ in range(n):
            fresh.evaluate_and_update_policy()
        return time.perf_counter() - start

    seconds, runs = median_runs(run, repeats, budget)
    return Timing("OpenSpiel C++ CFRPlusSolver", n, setup_seconds, seconds, runs)


def openspiel_python(game: str, n: int, repeats: int, budget: float) -> Timing:
    import pyspiel
    from open_spiel.python.algorithms import cfr, exploitability

    os_game = pyspiel.load_game(GAMES[game][0])
    start = time.perf_counter()
    solver = cfr.CFRPlusSolver(os_game)
    setup_seconds = time.perf_counter() - start
    times = []
    for i in range(1, n + 1):
        start = time.perf_counter()
        solver.evaluate_and_update_policy()
        times.append(time.perf_counter() - start)
        if i >= n - 1:  # the same N as C++: check it on the Python solver's own policy
            value = exploitability.exploitability(os_game, solver.average_policy())
            assert (value < TARGET) == (i == n), f"Python CFR+ at {i}: {value}"
    runs = [sum(times)]  # the checked run, checks excluded
    while len(runs) < repeats and sum(runs) < budget:
        runs.append(_python_run(os_game, n))
    seconds = statistics.median(runs)
    return Timing("OpenSpiel Python CFRPlusSolver", n, setup_seconds, seconds, len(runs))


def _python_run(os_game, n: int) -> float:
    from open_spiel.python.algorithms import cfr

    solver = cfr.CFRPlusSolver(os_game)
    start = time.perf_counter()
    for _ in range(n):
        solver.evaluate_and_update_policy()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default="kuhn,leduc")
    parser.add_argument("--repeats", type=int, default=5, help="runs per timing (median)")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds per timing")
    parser.add_argument("--no-python", action="store_true", help="skip OpenSpiel's Python CFR+")
    args = parser.parse_args()
    try:
        import pyspiel  # noqa: F401
    except ImportError:
        pyspiel = None
    print(f"time to exploitability {TARGET:g} · {platform.processor() or platform.machine()}")
    header = f"{'game':6} {'solver':32} {'iters':>6} {'setup s':>8} {'iterate s':>10} {'runs':>4}"
    print(header + f" {'× stratagem':>12}")
    for game in args.games.split(","):
        mine = ours(game, args.repeats, args.budget)
        rows = [mine]
        if pyspiel is not None:
            cpp = openspiel_cpp(game, args.repeats, args.budget)
            rows.append(cpp)
            if not args.no_python:
                rows.append(openspiel_python(game, cpp.iterations, args.repeats, args.budget))
        for t in rows:
            ratio = t.seconds / mine.seconds
            print(
                f"{game:6} {t.solver:32} {t.iterations:6d} {t.setup_seconds:8.4f} "
                f"{t.seconds:10.4f} {t.runs:4d} {ratio:11.1f}×"
            )
    if pyspiel is None:
        print("open_spiel is not installed: OpenSpiel rows skipped (pip install open_spiel)")


if __name__ == "__main__":
    main()
