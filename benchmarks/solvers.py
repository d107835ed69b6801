"""CFR+ speed against OpenSpiel: ``python benchmarks/solvers.py`` (or ``make bench``).

Time to exploitability 1e-3 on Kuhn and Leduc poker for stratagem's vectorised CFR+, OpenSpiel's
C++ ``pyspiel.CFRPlusSolver`` and OpenSpiel's Python ``CFRPlusSolver``, all in one process.

For each solver, the iteration count N at which the average policy's exploitability first drops
below 1e-3 is found first, each with its own exploitability (stratagem's flat best response,
pyspiel's C++ one; the Python solver is bit-identical to the C++ one, so it gets the C++ N, and
its own exploitability is checked at N - 1 and N). Then N iterations are timed from a fresh
solver, setup (building the solver) excluded and reported apart. The solvers take turns, one run
each per round, so a busy machine slows them alike; each time is the median of up to
``--repeats`` rounds, a solver dropping out once it has spent ``--budget`` seconds. Ratios are
a solver's time over stratagem's (above 1: stratagem is faster).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from stratagem.games import kuhn, leduc
from stratagem.solvers.cfr import CFR_PLUS, CFRSolver
from stratagem.solvers.tree import flatten

TARGET = 1e-3
GAMES = {"kuhn": ("kuhn_poker", kuhn.game_tree), "leduc": ("leduc_poker", leduc.game_tree)}


@dataclass
class Runner:
    """One solver on one game: N iterations to the target, and timed runs of N iterations."""

    name: str
    iterations: int
    setup: Callable[[], object]  # builds a fresh solver
    step: Callable[[object], None]  # one iteration
    setup_seconds: float = 0.0
    times: list[float] = field(default_factory=list)

    def run(self) -> None:
        start = time.perf_counter()
        solver = self.setup()
        built = time.perf_counter()
        for _ in range(self.iterations):
            self.step(solver)
        self.setup_seconds = built - start
        self.times.append(time.perf_counter() - built)


def ours(game: str) -> Runner:
    build = GAMES[game][1]
    solver = CFRSolver(build(), CFR_PLUS)
    while solver.exploitability() >= TARGET or solver.iteration == 0:
        solver.iterate(1)
    return Runner(
        "stratagem CFR+ (numpy)",
        solver.iteration,
        lambda: CFRSolver(flatten(build()), CFR_PLUS),
        lambda s: s.iterate(1),  # type: ignore[attr-defined]
    )


def openspiel_cpp(game: str) -> Runner:
    import pyspiel

    os_game = pyspiel.load_game(GAMES[game][0])
    solver = pyspiel.CFRPlusSolver(os_game)
    n = 0
    while n == 0 or pyspiel.exploitability(os_game, solver.average_policy()) >= TARGET:
        solver.evaluate_and_update_policy()
        n += 1
    return Runner(
        "OpenSpiel C++ CFRPlusSolver",
        n,
        lambda: pyspiel.CFRPlusSolver(os_game),
        lambda s: s.evaluate_and_update_policy(),  # type: ignore[attr-defined]
    )


def openspiel_python(game: str, n: int) -> Runner:
    import pyspiel
    from open_spiel.python.algorithms import cfr, exploitability

    os_game = pyspiel.load_game(GAMES[game][0])
    start = time.perf_counter()
    solver = cfr.CFRPlusSolver(os_game)
    runner = Runner(
        "OpenSpiel Python CFRPlusSolver",
        n,
        lambda: cfr.CFRPlusSolver(os_game),
        lambda s: s.evaluate_and_update_policy(),  # type: ignore[attr-defined]
        setup_seconds=time.perf_counter() - start,
    )
    elapsed = 0.0  # this first run counts as a timed run; its two checks do not
    for i in range(1, n + 1):
        start = time.perf_counter()
        solver.evaluate_and_update_policy()
        elapsed += time.perf_counter() - start
        if i >= n - 1:
            value = exploitability.exploitability(os_game, solver.average_policy())
            assert (value < TARGET) == (i == n), f"Python CFR+ at {i}: {value}"
    runner.times.append(elapsed)
    return runner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default="kuhn,leduc")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of timed runs (median)")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds per solver")
    parser.add_argument("--no-python", action="store_true", help="skip OpenSpiel's Python CFR+")
    args = parser.parse_args()
    try:
        import pyspiel
    except ImportError:
        pyspiel = None
    print(
        f"time to exploitability {TARGET:g} · {os.cpu_count()} CPUs · load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'game':6} {'solver':32} {'iters':>6} {'setup s':>8} {'iterate s':>10} {'runs':>4} "
        f"{'× stratagem':>12}"
    )
    for game in args.games.split(","):
        runners = [ours(game)]
        if pyspiel is not None:
            runners.append(openspiel_cpp(game))
            if not args.no_python:
                runners.append(openspiel_python(game, runners[1].iterations))
        for _ in range(args.repeats):
            for r in runners:
                if len(r.times) < args.repeats and sum(r.times) < args.budget:
                    r.run()
        base = statistics.median(runners[0].times)
        for r in runners:
            seconds = statistics.median(r.times)
            print(
                f"{game:6} {r.name:32} {r.iterations:6d} {r.setup_seconds:8.4f} "
                f"{seconds:10.4f} {len(r.times):4d} {seconds / base:11.1f}×"
            )
    if pyspiel is None:
        print("open_spiel is not installed: OpenSpiel rows skipped (pip install open_spiel)")


if __name__ == "__main__":
    main()
