"""Meta-solvers say what they return and how far it is from an equilibrium; zero-sum-nash never
passes off a general-sum maximin as an equilibrium; the bargaining disagreement point is
scale-invariant by default and settable."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from stratagem.cli.main import app
from stratagem.errors import ConfigError
from stratagem.solvers.matrix import (
    CONCEPTS,
    META_SOLVERS,
    cce_gap,
    meta_solver,
    nash_bargaining,
    nash_gap,
    relative_disagreement,
    zero_sum_nash,
)
from stratagem.solvers.psro import CandidateOracle, MetaGame, psro

BOS_ROW = np.array([[2.0, 0.0], [0.0, 1.0]])
BOS_COL = np.array([[1.0, 0.0], [0.0, 2.0]])
CHICKEN_ROW = np.array([[0.0, 7.0], [2.0, 6.0]])
CHICKEN_COL = CHICKEN_ROW.T


def test_zero_sum_nash_refuses_a_general_sum_game_where_maximin_is_no_equilibrium():
    assert nash_gap(zero_sum_nash(BOS_ROW)[0], BOS_ROW, BOS_COL) == pytest.approx(1 / 3)
    with pytest.raises(ConfigError, match="Nash gap 0.3333"):
        META_SOLVERS["zero-sum-nash"](BOS_ROW, BOS_COL)
    rps = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
    profile = META_SOLVERS["zero-sum-nash"](rps + 3, 3 - rps)  # constant-sum: fine
    assert nash_gap(profile, rps + 3, 3 - rps) == pytest.approx(0.0, abs=1e-9)


def test_gaps_tell_each_concept_apart_on_chicken():
    gaps = {
        name: (nash_gap(p, CHICKEN_ROW, CHICKEN_COL), cce_gap(p, CHICKEN_ROW, CHICKEN_COL))
        for name in ("cce", "replicator", "regret-matching")
        for p in [META_SOLVERS[name](CHICKEN_ROW, CHICKEN_COL)]
    }
    assert gaps["cce"][1] == pytest.approx(0.0, abs=1e-9)  # a CCE ...
    assert gaps["cce"][0] == pytest.approx(0.375)  # ... whose marginals are no Nash equilibrium
    assert gaps["regret-matching"][1] < 0.01  # approaches the CCE set
    assert gaps["replicator"][0] >= 0.0
    assert set(CONCEPTS) == set(META_SOLVERS)
    assert "time-averaged" in CONCEPTS["replicator"] and "Nash" in CONCEPTS["zero-sum-nash"]


def test_bargaining_disagreement_is_scale_invariant_and_settable():
    rng = np.random.default_rng(5)
    solve = META_SOLVERS["nash-bargaining"]
    for _ in range(5):
        row, col = rng.uniform(0, 5, size=(3, 3)), rng.uniform(0, 5, size=(3, 3))
        base = solve(row, col).joint
        assert solve(100 * row - 7, col / 10).joint == pytest.approx(base, abs=1e-9)
        d = relative_disagreement(row, col)
        assert d[0] == pytest.approx(row.min() - 0.1 * np.ptp(row))
    # a fixed margin is not scale-invariant: seed 003's rule moves with the units
    row = np.array([[4.0, 0.0], [0.0, 1.0]])
    col = np.array([[1.0, 0.0], [0.0, 4.0]])
    small = nash_bargaining(row / 100, col, margin=0.1).joint
    assert small != pytest.approx(nash_bargaining(row, col, margin=0.1).joint)
    point = nash_bargaining(BOS_ROW, BOS_COL, point=(0.5, 0.0)).joint
    assert point == pytest.approx(
        meta_solver("nash-bargaining", (0.5, 0.0))(BOS_ROW, BOS_COL).joint
    )
    with pytest.raises(ConfigError, match="disagreement point"):
        nash_bargaining(BOS_ROW, BOS_COL, point=(5.0, 5.0))
    with pytest.raises(ConfigError, match="nash-bargaining setting"):
        meta_solver("cce", (0.0, 0.0))


def test_psro_log_names_the_concept_and_its_gaps():
    payoffs = {
        (a, b): (float(CHICKEN_ROW[i, j]), float(CHICKEN_COL[i, j]))
        for i, a in enumerate(("Dare", "Chicken"))
        for j, b in enumerate(("Dare", "Chicken"))
    }

    def evaluate(pairs):
        return {p: payoffs[p] for p in pairs}

    result = psro(
        MetaGame(evaluate),
        CandidateOracle(("Dare", "Chicken")),
        "replicator",
        initial=("Dare", "Chicken"),
        iterations=3,
    )
    log = json.loads(result.to_json())
    assert log["solution_concept"] == CONCEPTS["replicator"]
    final = log["iterations"][-1]
    row, col = np.array(log["row_payoffs"]), np.array(log["col_payoffs"])
    profile = META_SOLVERS["replicator"](row, col)
    assert final["nash_gap"] == pytest.approx(nash_gap(profile, row, col))
    assert final["cce_gap"] == pytest.approx(cce_gap(profile, row, col))


def test_psro_command_takes_a_disagreement_point(tmp_path):
    args = ["psro", "--game", "ipd", "--candidates", "AlwaysCooperate,AlwaysDefect"]
    args += ["--episodes", "1", "--iterations", "2", "--meta-solver", "nash-bargaining"]
    result = CliRunner().invoke(app, [*args, "--disagreement", "0.5,0.5", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    log = json.loads((tmp_path / "psro.json").read_text())
    assert log["disagreement"] == [0.5, 0.5]
    assert log["solution_concept"].startswith("Nash bargaining")
    bad = [*args[:-2], "--meta-solver", "cce", "--disagreement", "0,0", "-o", str(tmp_path)]
    result = CliRunner().invoke(app, bad)
    assert isinstance(result.exception, ConfigError)
