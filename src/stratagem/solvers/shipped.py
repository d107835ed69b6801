"""Equilibrium policies shipped as data, and how to write them again.

Strategies sit below the solvers (they may not import them), so an equilibrium a strategy plays
is solved here once and shipped as a JSON file beside the strategies: Leduc's ``LeducCFR`` reads
``strategies/data/leduc_cfr.json``, CFR+'s average policy after ``LEDUC_ITERATIONS`` iterations
(deterministic: the solver sums in OpenSpiel's order). ``python -m stratagem.solvers.shipped``
rewrites the file from a fresh solve (about 3 s); the tests check that the file is that solve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LEDUC_ALGORITHM = "cfr+"
LEDUC_ITERATIONS = 3000
LEDUC_FILE = Path(__file__).resolve().parents[1] / "strategies" / "data" / "leduc_cfr.json"


def solve_leduc() -> dict[str, Any]:
    """Returns the file's content from a fresh solve: algorithm, iterations, exploitability,
    both positions' values and the average policy (infoset key -> {action: probability})."""
    from stratagem.games.leduc import game_tree
    from stratagem.solvers.cfr import ALGORITHMS, CFRSolver

    solver = CFRSolver(game_tree(), ALGORITHMS[LEDUC_ALGORITHM])
    solver.iterate(LEDUC_ITERATIONS)
    return {
        "game": "leduc",
        "algorithm": LEDUC_ALGORITHM,
        "iterations": LEDUC_ITERATIONS,
        "exploitability": solver.exploitability(),
        "value": list(solver.value()),
        "policy": solver.average_policy(),
    }


def write_leduc(path: Path = LEDUC_FILE) -> dict[str, Any]:
    """Solves Leduc and writes the result to ``path`` (one information set per line, floats in
    full precision, so the file reads back bit for bit); returns what it wrote."""
    data = solve_leduc()
    policy = data.pop("policy")
    head = json.dumps(data)[:-1]
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in policy.items())
    path.write_text(f'{head}, "policy": {{\n{rows}\n}}}}\n')
    return {**data, "policy": policy}


if __name__ == "__main__":
    written = write_leduc()
    print(
        f"wrote {LEDUC_FILE.name}: {written['algorithm']} x {written['iterations']}, "
        f"exploitability {written['exploitability']:.3g}"
    )
