"""Normal-form solvers on textbook games with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from stratagem.solvers.matrix import (
    META_SOLVERS,
    Profile,
    cce,
    disagreement,
    nash_bargaining,
    regret_matching,
    replicator,
    zero_sum_nash,
)

PENNIES = np.array([[1.0, -1.0], [-1.0, 1.0]])
# asymmetric pennies: row wins 2 on (H, H); equilibrium (2/5, 3/5) for both, value 1/5
SKEWED = np.array([[2.0, -1.0], [-1.0, 1.0]])
RPS = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
# battle of the sexes, actions (Opera, Football)
BOS_ROW = np.array([[2.0, 0.0], [0.0, 1.0]])
BOS_COL = np.array([[1.0, 0.0], [0.0, 2.0]])
# chicken (Aumann 1974), actions (Dare, Chicken)
CHICKEN_ROW = np.array([[0.0, 7.0], [2.0, 6.0]])
CHICKEN_COL = CHICKEN_ROW.T


@pytest.mark.parametrize(
    ("game", "x", "value"),
    [
        (PENNIES, [1 / 2, 1 / 2], 0.0),
        (SKEWED, [2 / 5, 3 / 5], 1 / 5),
        (RPS, [1 / 3, 1 / 3, 1 / 3], 0.0),
    ],
    ids=["pennies", "skewed-pennies", "rps"],
)
def test_zero_sum_nash_by_linear_programming(game, x, value):
    profile, v = zero_sum_nash(game)
    assert profile.row == pytest.approx(x, abs=1e-9)
    assert profile.col == pytest.approx(x, abs=1e-9)  # these games are symmetric in that way
    assert v == pytest.approx(value, abs=1e-9)
    assert profile.values(game, -game) == pytest.approx((value, -value), abs=1e-9)


def test_regret_matching_approaches_the_equilibrium():
    assert regret_matching(PENNIES, -PENNIES, 100).row == pytest.approx([0.5, 0.5])
    profile = regret_matching(SKEWED, -SKEWED, 20_000)
    assert profile.row == pytest.approx([0.4, 0.6], abs=0.01)
    assert profile.col == pytest.approx([0.4, 0.6], abs=0.01)
    assert profile.values(SKEWED, -SKEWED)[0] == pytest.approx(0.2, abs=0.01)


def test_time_averaged_replicator_dynamics_find_the_interior_equilibrium():
    # in zero-sum games the replicator orbits the equilibrium; the time average converges to it
    start = (np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.2, 0.6]))
    profile = replicator(RPS, -RPS, iterations=40_000, step=0.01, initial=start)
    assert profile.row == pytest.approx([1 / 3] * 3, abs=0.02)
    assert profile.col == pytest.approx([1 / 3] * 3, abs=0.02)
    profile = replicator(SKEWED, -SKEWED)
    assert profile.row == pytest.approx([0.4, 0.6], abs=0.01)


def test_replicator_eliminates_a_dominated_strategy():
    prisoners = np.array([[3.0, 0.0], [5.0, 1.0]])  # (cooperate, defect)
    profile = replicator(prisoners, prisoners.T, iterations=20_000)
    assert profile.row[1] > 0.98 and profile.col[1] > 0.98


def test_cce_of_chicken():
    # maximum welfare: (Dare, Chicken) 1/4, (Chicken, Dare) 1/4, (Chicken, Chicken) 1/2;
    # 10.5 in total, against 9 for either pure equilibrium and 28/3 for the mixed one
    profile = cce(CHICKEN_ROW, CHICKEN_COL)
    assert profile.joint == pytest.approx(np.array([[0.0, 0.25], [0.25, 0.5]]), abs=1e-9)
    assert profile.values(CHICKEN_ROW, CHICKEN_COL) == pytest.approx((5.25, 5.25), abs=1e-9)


def test_cce_has_no_profitable_commitment():
    rng = np.random.default_rng(1)
    row, col = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    p = cce(row, col)
    u0, u1 = p.values(row, col)
    assert (row @ p.col).max() <= u0 + 1e-9
    assert (p.row @ col).max() <= u1 + 1e-9


def test_nash_bargaining_of_the_battle_of_the_sexes():
    # symmetric disagreement point: split the two equilibria evenly, 3/2 each
    profile = nash_bargaining(BOS_ROW, BOS_COL, margin=0.1)
    assert profile.joint == pytest.approx(np.array([[0.5, 0.0], [0.0, 0.5]]), abs=1e-12)
    assert profile.values(BOS_ROW, BOS_COL) == pytest.approx((1.5, 1.5), abs=1e-12)
    assert disagreement(BOS_ROW, BOS_COL, 0.1) == (-0.1, -0.1)


def test_nash_bargaining_equals_a_convex_optimiser():
    from scipy.optimize import minimize

    rng = np.random.default_rng(2)
    for _ in range(5):
        row, col = rng.uniform(0, 5, size=(3, 3)), rng.uniform(0, 5, size=(3, 3))
        exact = nash_bargaining(row, col, margin=0.5)
        d = np.array(disagreement(row, col, 0.5))

        def objective(p, row=row, col=col, d=d):
            return -np.log(p @ row.ravel() - d[0]) - np.log(p @ col.ravel() - d[1])

        numeric = minimize(
            objective,
            np.full(9, 1 / 9),
            bounds=[(0, 1)] * 9,
            constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1}],
            method="SLSQP",
            options={"ftol": 1e-12, "maxiter": 500},
        )
        assert -objective(exact.joint.ravel()) >= -numeric.fun - 1e-9
        assert exact.values(row, col) == pytest.approx(
            (numeric.x @ row.ravel(), numeric.x @ col.ravel()), abs=1e-4
        )


def test_every_meta_solver_returns_a_distribution():
    for name, solve in META_SOLVERS.items():
        profile = solve(SKEWED, -SKEWED)
        assert isinstance(profile, Profile), name
        assert profile.joint.sum() == pytest.approx(1.0) and (profile.joint >= 0).all(), name
