"""CFR and CFR+: the vectorised solver against its naive equivalent, and published values.

Bounds are measured (and pinned to OpenSpiel's C++ solver, which needs the same iterations):
CFR+ on Leduc first has exploitability below 1e-3 at iteration 447.
"""

from __future__ import annotations

import numpy as np
import pytest

from stratagem.games import kuhn, leduc
from stratagem.solvers.best_response import best_response_values, nash_conv
from stratagem.solvers.cfr import (
    CFR,
    CFR_PLUS,
    Blocks,
    CFRSolver,
    ReferenceCFR,
    checkpoints,
    normalise,
    regret_matching,
    solve,
)
from stratagem.solvers.tree import flatten
from stratagem.tree import EagerNode


def naive_regret_matching(r: list[float]) -> list[float]:
    t = sum(x for x in r if x > 0)
    return [max(x, 0) / t for x in r] if t > 0 else [1 / len(r)] * len(r)


def test_regret_matching_and_normalise_equal_their_naive_equivalents():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 5, size=40)
    slot_start = np.r_[0, np.cumsum(sizes)]
    values = rng.normal(size=slot_start[-1]) * (rng.random(slot_start[-1]) < 0.7)
    values[: sizes[0]] = -1.0  # a block with no positive regret: uniform
    blocks = Blocks.of(slot_start, np.arange(len(sizes)))
    matched = regret_matching(np.append(values, 0.0), blocks)
    sums = np.abs(values)
    sums[slot_start[1] : slot_start[2]] = 0.0  # a block never reached: uniform
    averaged = normalise(np.append(sums, 0.0), blocks)
    for i in range(len(sizes)):
        block = slice(slot_start[i], slot_start[i + 1])
        assert list(matched[block]) == naive_regret_matching(list(values[block]))
        total = sum(sums[block])
        naive = [x / total for x in sums[block]] if total > 0 else [1 / sizes[i]] * sizes[i]
        assert list(averaged[block]) == naive


@pytest.mark.parametrize("variant", [CFR, CFR_PLUS], ids=["cfr", "cfr+"])
@pytest.mark.parametrize(("game", "iterations"), [(kuhn, 100), (leduc, 3)], ids=["kuhn", "leduc"])
def test_vectorised_cfr_equals_the_reference_recursion(game, iterations, variant):
    fast, slow = CFRSolver(game.game_tree(), variant), ReferenceCFR(game.game_tree(), variant)
    fast.iterate(iterations)
    slow.iterate(iterations)
    assert fast.average_policy() == slow.average_policy()  # bit for bit
    assert fast.nash_conv() == pytest.approx(slow.nash_conv(), abs=1e-12)


def test_kuhn_value_is_minus_one_eighteenth():
    # Kuhn 1950; OpenSpiel's kuhn_poker_test pins the same value
    solver = CFRSolver(kuhn.game_tree(), CFR_PLUS)
    solver.iterate(1000)
    v0, v1 = solver.value()
    assert v0 == pytest.approx(-1 / 18, abs=1e-6)
    assert v1 == pytest.approx(1 / 18, abs=1e-6)
    assert solver.exploitability() < 1e-4


def test_cfr_plus_on_leduc_reaches_exploitability_1e_3_at_iteration_447():
    solver = CFRSolver(leduc.game_tree(), CFR_PLUS)
    solver.iterate(446)
    assert solver.exploitability() >= 1e-3
    solver.iterate(1)
    assert solver.exploitability() < 1e-3
    assert solver.value()[0] == pytest.approx(-0.0856, abs=2e-3)  # Leduc's value, player 0


def test_vanilla_cfr_converges_on_kuhn():
    solver = CFRSolver(kuhn.game_tree(), CFR)
    solver.iterate(1000)
    assert solver.exploitability() < 1e-3


def test_flat_exploitability_equals_the_recursive_one():
    root = leduc.game_tree()
    solver = CFRSolver(root, CFR_PLUS)
    solver.iterate(5)
    assert solver.nash_conv() == pytest.approx(nash_conv(root, solver.average_policy()), abs=1e-12)


def skewed_tree() -> EagerNode:
    """Player 0's information set "I" lies at depth 1 after chance's x and at depth 2 after y
    (player 1 moved first, unseen): perfect recall, but not aligned by depth."""

    def leaf(v: float) -> EagerNode:
        return EagerNode.terminal((v, -v))

    def info(shift: float) -> EagerNode:
        return EagerNode.decision(0, "I", ("a", "b"), (leaf(1 + shift), leaf(-1 + shift)))

    y = EagerNode.decision(1, "J", ("c", "d"), (info(0.5), info(-2.0)))
    return EagerNode.chance(("x", "y"), (info(0.0), y), (0.25, 0.75))


def test_trees_not_aligned_by_depth_still_solve():
    root = skewed_tree()
    tree = flatten(root)
    assert not tree.infoset_depth_aligned
    with pytest.raises(ValueError, match="one depth"):
        best_response_values(tree, tree.uniform())
    for variant in (CFR, CFR_PLUS):
        fast, slow = CFRSolver(root, variant), ReferenceCFR(root, variant)
        fast.iterate(30)
        slow.iterate(30)
        assert fast.average_policy() == slow.average_policy()
        assert fast.nash_conv() == pytest.approx(slow.nash_conv(), abs=1e-12)


def test_solve_records_a_falling_curve():
    solution = solve(kuhn.game_tree(), "cfr+", 300, points=10)
    its = [i for i, _ in solution.curve]
    assert its[0] == 1 and its[-1] == 300 and its == sorted(set(its))
    assert solution.curve[-1][1] < solution.curve[0][1] / 100
    assert solution.exploitability == solution.curve[-1][1]
    assert set(solution.policy) == set(kuhn.INFOSETS)
    assert checkpoints(5, 60) == [1, 2, 3, 4, 5]


def test_one_checkpoint_is_the_final_iteration():
    assert checkpoints(1000, 1) == [1000]
    assert checkpoints(1, 1) == [1]
    assert checkpoints(1000, 2) == [1, 1000]
    solution = solve(kuhn.game_tree(), "cfr+", 50, points=1)
    assert [i for i, _ in solution.curve] == [50]
