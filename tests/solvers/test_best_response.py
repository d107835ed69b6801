"""Best response and NashConv on the protocol, and their vectorised versions."""

from __future__ import annotations

import numpy as np
import pytest

from stratagem.games import kuhn, leduc
from stratagem.solvers.best_response import (
    best_response_policy,
    best_response_value,
    best_response_values,
    flat_nash_conv,
    nash_conv,
    on_policy_values,
)
from stratagem.solvers.tree import expected_returns, flatten
from stratagem.tree import EagerNode, infosets, uniform_policy


def random_policy(root, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    return {
        key: dict(zip(acts, map(float, rng.dirichlet(np.ones(len(acts)))), strict=True))
        for key, (_, acts) in infosets(root).items()
    }


def battle_of_the_sexes() -> EagerNode:
    """A general-sum game as a tree: player 1 does not see player 0's choice (one infoset)."""
    pay = {("O", "O"): (2.0, 1.0), ("F", "F"): (1.0, 2.0)}

    def second(first: str) -> EagerNode:
        leaves = tuple(EagerNode.terminal(pay.get((first, b), (0.0, 0.0))) for b in "OF")
        return EagerNode.decision(1, "1", ("O", "F"), leaves)

    return EagerNode.decision(0, "0", ("O", "F"), (second("O"), second("F")))


def test_nash_conv_in_a_general_sum_game():
    root = battle_of_the_sexes()
    # uniform: each earns 3/4 and could earn 1 by best-responding: NashConv 1/2
    assert nash_conv(root, uniform_policy(root)) == pytest.approx(0.5)
    pure = {"0": {"O": 1.0, "F": 0.0}, "1": {"O": 1.0, "F": 0.0}}
    assert nash_conv(root, pure) == 0.0
    mixed = {"0": {"O": 2 / 3, "F": 1 / 3}, "1": {"O": 1 / 3, "F": 2 / 3}}
    assert nash_conv(root, mixed) == pytest.approx(0.0, abs=1e-15)
    tree = flatten(root)
    assert flat_nash_conv(tree, tree.policy_array(mixed)) == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("game", [kuhn, leduc], ids=["kuhn", "leduc"])
def test_vectorised_best_response_equals_the_recursion(game):
    root = game.game_tree()
    tree = flatten(root)
    for seed in range(3):
        policy = random_policy(root, seed)
        slots = tree.policy_array(policy)
        naive = [best_response_value(root, p, policy) for p in (0, 1)]
        assert best_response_values(tree, slots) == pytest.approx(naive, abs=1e-13)
        assert on_policy_values(tree, slots) == pytest.approx(
            expected_returns(root, policy), abs=1e-13
        )


def test_best_response_policy_earns_the_best_response_value():
    root = kuhn.game_tree()
    policy = random_policy(root, 3)
    for player in (0, 1):
        response = best_response_policy(root, player, policy)
        owned = {k for k, (p, _) in infosets(root).items() if p == player}
        assert set(response) == owned
        assert all(sorted(d.values()) == [1.0] for d in response.values())
        played = {**policy, **response}
        value = expected_returns(root, played)[player]
        assert value == pytest.approx(best_response_value(root, player, policy), abs=1e-15)
