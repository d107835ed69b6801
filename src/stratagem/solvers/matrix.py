"""Two-player normal-form (meta-)game solvers (SPEC §9; the meta-solvers of PSRO, seed 003).

A game is two payoff matrices, ``row[i, j]`` and ``col[i, j]``, for the row player choosing i and
the column player choosing j. Every solver returns a ``Profile``: a joint distribution over
action pairs, with its marginals. Product solvers (Nash) return an outer product; correlated
ones (CCE, Nash bargaining) return a genuine joint.

- ``regret_matching``: both players run regret matching (Hart & Mas-Colell 2000) against each
  other from the uniform strategy; returns the empirical joint play, which approaches the set of
  coarse-correlated equilibria (its marginals, a Nash equilibrium in zero-sum games).
- ``replicator``: two-population discrete-time replicator dynamics, x ← x + η x ∘ (Ay − xᵀAy),
  time-averaged (in zero-sum games the orbits cycle and only their time average approaches
  the equilibrium). Departure: a small floor keeps every strategy alive (as OpenSpiel's projected
  replicator dynamics, Lanctot et al. 2017), so a dominated strategy decays instead of vanishing
  in one step.
- ``cce``: the coarse-correlated equilibrium of maximum welfare (Σ of both players' expected
  payoffs), by linear programming.
- ``zero_sum_nash``: maximin strategies of a zero-sum game by linear programming. As a
  meta-solver (``zero-sum-nash``, ``zero_sum_meta``) it returns a Nash equilibrium or refuses:
  on a general-sum meta-game maximin ignores the column payoffs, so its profile is kept only
  where it is an equilibrium anyway (Nash gap 0) and refused otherwise (Nash gap 1/3 on the
  battle of the sexes).
- ``nash_bargaining``: the Nash bargaining solution over joint outcomes, the joint distribution
  maximising Σᵢ log(uᵢ − dᵢ) over the disagreement point d. The feasible payoffs are the convex
  hull of the outcomes, so the optimum lies on a segment between two outcomes and each segment's
  optimum has a closed form (the stationary point of a sum of two logarithms): the solver is
  exact, not iterative. The disagreement point is settable (``point``); by default the function
  keeps seed 003's (App. D) "each player's minimum payoff minus a margin", and the
  ``nash-bargaining`` meta-solver uses ``relative_disagreement``, the minimum minus 10% of the
  player's payoff range, which (unlike a fixed margin) is invariant to rescaling the payoffs.

What each meta-solver returns (``CONCEPTS``; PSRO logs it with the gaps below):

- ``zero-sum-nash``: a Nash equilibrium (of a constant-sum game);
- ``cce``: a coarse-correlated equilibrium (a joint; its marginals need not be a Nash
  equilibrium);
- ``regret-matching``: the empirical joint play of regret matching, approaching the CCE set
  (ε-CCE after finitely many iterations);
- ``replicator``: the time-averaged marginals of replicator dynamics, as independent play; no
  equilibrium in general (the average keeps the transient, and a rest point need not be one),
  so its Nash gap is measured, not assumed 0;
- ``nash-bargaining``: the Nash bargaining solution, a welfare criterion, not an equilibrium;
- ``uniform``: uniform independent play, not an equilibrium.

``nash_gap`` (NashConv of the marginals played independently: Σ of each player's best-response
gain) and ``cce_gap`` (Σ of each player's best gain from committing to one action against the
joint) measure how far a profile is from each concept; 0 at an exact equilibrium.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stratagem.errors import ConfigError

Payoffs = np.ndarray  # (m, n)


@dataclass(frozen=True)
class Profile:
    """A solution of a two-player normal-form game: a joint distribution over action pairs."""

    joint: np.ndarray  # (m, n), non-negative, sums to 1

    @classmethod
    def product(cls, x: np.ndarray, y: np.ndarray) -> Profile:
        """The independent play of mixed strategies ``x`` (row) and ``y`` (column)."""
        return cls(np.outer(x, y))

    @property
    def row(self) -> np.ndarray:
        """(m,) the row player's marginal strategy."""
        return self.joint.sum(axis=1)

    @property
    def col(self) -> np.ndarray:
        """(n,) the column player's marginal strategy."""
        return self.joint.sum(axis=0)

    def values(self, row: Payoffs, col: Payoffs) -> tuple[float, float]:
        """Returns both players' expected payoffs under the joint distribution."""
        return float(np.sum(self.joint * row)), float(np.sum(self.joint * col))


def _check(row: Payoffs, col: Payoffs) -> tuple[np.ndarray, np.ndarray]:
    row, col = np.asarray(row, dtype=float), np.asarray(col, dtype=float)
    if row.ndim != 2 or row.shape != col.shape or row.size == 0:
        raise ValueError(f"payoff matrices must be two equal non-empty 2-D arrays: {row.shape}")
    return row, col


def _matched(regrets: np.ndarray) -> np.ndarray:
    """Regret matching: positive regrets normalised, or uniform when none is positive."""
    positive = np.maximum(regrets, 0.0)
    total = positive.sum()
    return positive / total if total > 0 else np.full(len(regrets), 1 / len(regrets))


def regret_matching(row: Payoffs, col: Payoffs, iterations: int = 10_000) -> Profile:
    """Returns the empirical joint play of two regret matchers after ``iterations`` rounds of
    expected (not sampled) play, starting from zero regrets."""
    row, col = _check(row, col)
    regrets_x, regrets_y = np.zeros(row.shape[0]), np.zeros(row.shape[1])
    joint = np.zeros(row.shape)
    for _ in range(iterations):
        x, y = _matched(regrets_x), _matched(regrets_y)
        joint += np.outer(x, y)
        gains_x = row @ y  # (m,) each pure row's payoff against y
        gains_y = x @ col  # (n,)
        regrets_x += gains_x - x @ gains_x
        regrets_y += gains_y - gains_y @ y
    return Profile(joint / iterations)


def replicator(
    row: Payoffs,
    col: Payoffs,
    iterations: int = 20_000,
    step: float = 0.01,
    floor: float = 1e-6,
    initial: tuple[np.ndarray, np.ndarray] | None = None,
) -> Profile:
    """Returns the time average of two-population replicator dynamics (as independent play).

    Args:
        row: the row player's payoffs (m, n).
        col: the column player's payoffs (m, n).
        iterations: Euler steps; the average runs over all of them.
        step: the Euler step η, in units of the payoffs.
        floor: the least probability a strategy keeps after each step (then renormalised).
        initial: the starting mixed strategies; uniform by default.
    """
    row, col = _check(row, col)
    m, n = row.shape
    x, y = initial if initial is not None else (np.full(m, 1 / m), np.full(n, 1 / n))
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    mean_x, mean_y = np.zeros(m), np.zeros(n)
    for _ in range(iterations):
        mean_x += x
        mean_y += y
        fitness_x, fitness_y = row @ y, x @ col
        x = x + step * x * (fitness_x - x @ fitness_x)
        y = y + step * y * (fitness_y - y @ fitness_y)
        x = np.maximum(x, floor)
        y = np.maximum(y, floor)
        x, y = x / x.sum(), y / y.sum()
    return Profile.product(mean_x / iterations, mean_y / iterations)


def cce(row: Payoffs, col: Payoffs) -> Profile:
    """Returns the coarse-correlated equilibrium that maximises Σ of both expected payoffs.

    The constraints: no player gains by committing in advance to any one action,
    Σ_ij p_ij row[i', j] ≤ Σ_ij p_ij row[i, j] for every i' (and likewise for the column).
    """
    from scipy.optimize import linprog

    row, col = _check(row, col)
    m, n = row.shape
    # a deviation to i' earns row[i', j] whatever i the joint recommended
    deviations = [(row[k][None, :] - row).ravel() for k in range(m)]
    deviations += [(col[:, k][:, None] - col).ravel() for k in range(n)]
    result = linprog(
        c=-(row + col).ravel(),
        A_ub=np.array(deviations),
        b_ub=np.zeros(m + n),
        A_eq=np.ones((1, m * n)),
        b_eq=[1.0],
        bounds=(0, None),
        method="highs",
    )
    if not result.success:  # pragma: no cover - a CCE always exists
        raise RuntimeError(f"CCE linear program failed: {result.message}")
    joint = np.maximum(result.x, 0.0).reshape(m, n)
    return Profile(joint / joint.sum())


def zero_sum_nash(row: Payoffs) -> tuple[Profile, float]:
    """Returns a Nash equilibrium of the zero-sum game ``row`` (column payoffs ``-row``) and the
    row player's value, each player's strategy a maximin by linear programming."""
    row, _ = _check(row, row)
    x, value = _maximin(row)
    y, minus_value = _maximin(-row.T)
    assert abs(value + minus_value) < 1e-7 * max(1.0, float(np.abs(row).max()))
    return Profile.product(x, y), value


def _maximin(payoffs: np.ndarray) -> tuple[np.ndarray, float]:
    """The mixed strategy over rows maximising the worst-case column payoff, and that payoff."""
    from scipy.optimize import linprog

    m, n = payoffs.shape
    # variables (x_1..x_m, v): maximise v s.t. v ≤ Σ_i x_i payoffs[i, j] for every column j
    result = linprog(
        c=np.r_[np.zeros(m), -1.0],
        A_ub=np.c_[-payoffs.T, np.ones(n)],
        b_ub=np.zeros(n),
        A_eq=np.r_[np.ones(m), 0.0][None, :],
        b_eq=[1.0],
        bounds=[(0, None)] * m + [(None, None)],
        method="highs",
    )
    if not result.success:  # pragma: no cover - a maximin always exists
        raise RuntimeError(f"maximin linear program failed: {result.message}")
    x = np.maximum(result.x[:m], 0.0)
    return x / x.sum(), float(result.x[m])


def disagreement(row: Payoffs, col: Payoffs, margin: float) -> tuple[float, float]:
    """Returns each player's minimum payoff minus ``margin`` (seed 003's disagreement point;
    not scale-invariant: see ``relative_disagreement``)."""
    row, col = _check(row, col)
    return float(row.min() - margin), float(col.min() - margin)


def relative_disagreement(row: Payoffs, col: Payoffs, margin: float = 0.1) -> tuple[float, float]:
    """Returns each player's minimum payoff minus ``margin`` times that player's payoff range
    (``margin`` itself when the range is 0): rescaling or shifting a player's payoffs moves its
    point with them, so the bargaining solution is unchanged (scale-invariant)."""
    row, col = _check(row, col)
    out = []
    for payoffs in (row, col):
        spread = float(payoffs.max() - payoffs.min())
        out.append(float(payoffs.min()) - margin * (spread if spread > 0 else 1.0))
    return out[0], out[1]


def nash_bargaining(
    row: Payoffs,
    col: Payoffs,
    margin: float = 0.1,
    *,
    point: tuple[float, float] | None = None,
) -> Profile:
    """Returns the joint distribution maximising log(u₀ − d₀) + log(u₁ − d₁), where d is
    ``point`` when given, else the ``disagreement`` point (``margin`` > 0 keeps every log
    finite). Raises ``ConfigError`` when no outcome is above ``point`` for both players.

    Exact: for the segment from outcome Q to outcome P, with a = Q − d and b = P − Q, the
    objective log(a₀ + λb₀) + log(a₁ + λb₁) is concave in λ with its stationary point at
    λ* = −(b₀a₁ + b₁a₀) / (2b₀b₁); the best of every segment's endpoints and clipped λ* is the
    optimum over the convex hull (whose Pareto edges are among the segments). Naive
    equivalent: maximise the objective over the simplex of joint distributions with a convex
    optimiser (the tests do, with ``scipy.optimize.minimize``).
    """
    row, col = _check(row, col)
    if point is None and margin <= 0:
        raise ValueError("nash_bargaining needs a positive margin")
    d = np.array(point if point is not None else disagreement(row, col, margin), dtype=float)
    points = np.stack([row.ravel(), col.ravel()], axis=1)  # (K, 2)
    k = len(points)
    first, second = np.triu_indices(k)  # (L,) segments from Q = points[first] to P = points[second]
    a = points[first] - d  # (L, 2) > 0
    b = points[second] - points[first]  # (L, 2)
    product = b[:, 0] * b[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        stationary = -(b[:, 0] * a[:, 1] + b[:, 1] * a[:, 0]) / (2 * product)
    stationary = np.where(product < 0, np.clip(stationary, 0.0, 1.0), 0.0)
    candidates = np.stack([np.zeros(len(a)), np.ones(len(a)), stationary], axis=1)  # (L, 3)
    u = a[:, None, :] + candidates[:, :, None] * b[:, None, :]  # (L, 3, 2)
    with np.errstate(divide="ignore", invalid="ignore"):  # points below d are infeasible
        objective = np.where(
            (u[..., 0] > 0) & (u[..., 1] > 0), np.log(u[..., 0]) + np.log(u[..., 1]), -np.inf
        )  # (L, 3)
    if not np.isfinite(objective).any():
        raise ConfigError(
            f"nash bargaining: no outcome is above the disagreement point {tuple(map(float, d))} "
            "for both players; choose a lower point"
        )
    best = int(np.argmax(objective))
    segment, which = divmod(best, 3)
    lam = float(candidates[segment, which])
    joint = np.zeros(k)
    joint[first[segment]] += 1.0 - lam
    joint[second[segment]] += lam
    return Profile(joint.reshape(row.shape))


def uniform(row: Payoffs, col: Payoffs) -> Profile:
    """Returns uniform independent play (the meta-solver of fictitious-play-like PSRO)."""
    row, col = _check(row, col)
    m, n = row.shape
    return Profile.product(np.full(m, 1 / m), np.full(n, 1 / n))


def zero_sum_meta(row: Payoffs, col: Payoffs) -> Profile:
    """The ``zero-sum-nash`` meta-solver: always a Nash equilibrium, or a ``ConfigError``.

    On a constant-sum game (row + column payoffs constant) the maximin strategies are a Nash
    equilibrium. On a general-sum game maximin ignores the column payoffs, so its profile is
    returned only where it is a Nash equilibrium all the same (``nash_gap`` 0, e.g. mutual
    defection in the prisoner's dilemma); otherwise (the battle of the sexes: gap 1/3) the
    solver refuses, naming the gap, instead of returning a profile that is no equilibrium.
    """
    row, col = _check(row, col)
    total = row + col
    scale = max(1.0, float(np.abs(row).max()), float(np.abs(col).max()))
    profile = zero_sum_nash(row)[0]
    if float(total.max() - total.min()) <= 1e-9 * scale:
        return profile
    gap = nash_gap(profile, row, col)
    if gap > 1e-9 * scale:
        raise ConfigError(
            f"zero-sum-nash on a general-sum meta-game (row + column payoffs range over "
            f"[{total.min():.4g}, {total.max():.4g}]): its maximin profile is no equilibrium "
            f"(Nash gap {gap:.4g}); use cce, regret-matching or replicator"
        )
    return profile


def bargaining(row: Payoffs, col: Payoffs) -> Profile:
    """The ``nash-bargaining`` meta-solver: ``nash_bargaining`` from the scale-invariant
    ``relative_disagreement`` point."""
    return nash_bargaining(row, col, point=relative_disagreement(row, col))


def nash_gap(profile: Profile, row: Payoffs, col: Payoffs) -> float:
    """NashConv of the profile's marginals played independently: Σ over players of the best
    pure response's payoff minus the marginal's (0 exactly at a Nash equilibrium)."""
    row, col = _check(row, col)
    x, y = profile.row, profile.col
    gain_row = float((row @ y).max() - x @ row @ y)
    gain_col = float((x @ col).max() - x @ col @ y)
    return max(gain_row, 0.0) + max(gain_col, 0.0)


def cce_gap(profile: Profile, row: Payoffs, col: Payoffs) -> float:
    """Σ over players of the best gain from committing to one action in advance against the
    joint distribution (0 exactly at a coarse-correlated equilibrium)."""
    row, col = _check(row, col)
    joint = profile.joint
    gain_row = float((row @ profile.col).max() - np.sum(joint * row))
    gain_col = float((profile.row @ col).max() - np.sum(joint * col))
    return max(gain_row, 0.0) + max(gain_col, 0.0)


MetaSolver = Callable[[Payoffs, Payoffs], Profile]
META_SOLVERS: dict[str, MetaSolver] = {
    "uniform": uniform,
    "regret-matching": regret_matching,
    "replicator": replicator,
    "cce": cce,
    "zero-sum-nash": zero_sum_meta,
    "nash-bargaining": bargaining,
}
CONCEPTS: dict[str, str] = {  # what each meta-solver returns (see the module docstring)
    "uniform": "uniform independent play (not an equilibrium)",
    "regret-matching": "empirical joint play of regret matching (approaches the CCE set)",
    "replicator": "time-averaged marginals of replicator dynamics (no equilibrium in general)",
    "cce": "coarse-correlated equilibrium of maximum welfare",
    "zero-sum-nash": "Nash equilibrium (constant-sum games only)",
    "nash-bargaining": "Nash bargaining solution (a welfare criterion, not an equilibrium)",
}


def meta_solver(name: str, disagreement: tuple[float, float] | None = None) -> MetaSolver:
    """The meta-solver ``name`` (``KeyError`` when unknown); ``disagreement`` sets the
    disagreement point of ``nash-bargaining`` (and is refused with any other solver)."""
    solve = META_SOLVERS[name]
    if disagreement is None:
        return solve
    if name != "nash-bargaining":
        raise ConfigError(f"a disagreement point is a nash-bargaining setting, not {name}'s")
    point = (float(disagreement[0]), float(disagreement[1]))

    def bargain(row: Payoffs, col: Payoffs) -> Profile:
        return nash_bargaining(row, col, point=point)

    return bargain
