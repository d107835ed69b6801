"""The Node protocol: the eager tables implement it, and solvers use nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from stratagem.games import kuhn, leduc
from stratagem.solvers.best_response import best_response_value, nash_conv
from stratagem.solvers.cfr import CFRSolver
from stratagem.solvers.tree import expected_returns, flatten
from stratagem.tree import CHANCE, TERMINAL, EagerNode, Node, infosets, uniform_policy, walk


@dataclass(eq=False)
class LazyKuhn:
    """Kuhn poker from the rule tables, children made on first request and counted (as a
    dialogue tree would generate them): a second ``Node`` implementation."""

    cards: tuple[str, ...] = ()
    history: tuple[kuhn.Act, ...] = ()
    made: list[int] = field(default_factory=lambda: [0])
    _children: dict[str, LazyKuhn] = field(default_factory=dict)

    @property
    def player(self) -> int:
        if len(self.cards) < 2:
            return CHANCE
        if self.history in kuhn.TERMINAL:
            return TERMINAL
        return len(self.history) % 2

    def actions(self) -> tuple[str, ...]:
        if self.player == CHANCE:
            return tuple(c for c in kuhn.CARDS if c not in self.cards)
        if self.player == TERMINAL:
            return ()
        return tuple(str(a) for a in kuhn.LEGAL[self.history])

    def child(self, action: str) -> LazyKuhn:
        if action not in self.actions():
            raise KeyError(action)
        if action not in self._children:
            self.made[0] += 1
            if self.player == CHANCE:
                node = LazyKuhn((*self.cards, action), (), self.made)
            else:
                node = LazyKuhn(self.cards, (*self.history, kuhn.Act(action)), self.made)
            self._children[action] = node
        return self._children[action]

    def chances(self) -> tuple[float, ...]:
        n = len(self.actions())
        return (1 / n,) * n if self.player == CHANCE else ()

    def infoset(self) -> str:
        if self.player not in (0, 1):
            return ""
        return kuhn.infoset_key(self.cards[self.player], self.history)

    def returns(self) -> tuple[float, float]:
        if self.player != TERMINAL:
            return (0.0, 0.0)
        won = kuhn.first_payoff(self.history, self.cards[0], self.cards[1])
        return (won, -won)


def test_both_trees_implement_the_protocol():
    assert isinstance(kuhn.game_tree(), Node)
    assert isinstance(LazyKuhn(), Node)
    assert isinstance(leduc.game_tree(), Node)


def test_eager_node_contract():
    root = kuhn.game_tree()
    assert root.player == CHANCE
    assert root.actions() == ("J", "Q", "K") and root.chances() == (1 / 3,) * 3
    assert root.infoset() == "" and root.returns() == (0.0, 0.0)
    decision = root.child("K").child("J")
    assert decision.player == 0 and decision.infoset() == "K:"
    assert decision.actions() == ("PASS", "BET") and decision.chances() == ()
    terminal = decision.child("PASS").child("PASS")
    assert terminal.player == TERMINAL and terminal.returns() == (1.0, -1.0)
    assert terminal.actions() == ()
    with pytest.raises(KeyError):
        decision.child("CALL")
    with pytest.raises(ValueError, match="align"):
        EagerNode.chance(("a",), (terminal,), (0.5,))


def test_lazy_and_eager_kuhn_give_identical_results():
    lazy, eager = LazyKuhn(), kuhn.game_tree()
    assert len(list(walk(lazy))) == len(list(walk(eager))) == 58
    assert infosets(lazy) == infosets(eager)
    policy = uniform_policy(eager)
    assert expected_returns(lazy, policy) == expected_returns(eager, policy)
    assert nash_conv(lazy, policy) == nash_conv(eager, policy)
    assert best_response_value(lazy, 1, policy) == best_response_value(eager, 1, policy)
    a, b = CFRSolver(LazyKuhn()), CFRSolver(kuhn.game_tree())
    a.iterate(20)
    b.iterate(20)
    assert a.average_policy() == b.average_policy()


def test_a_lazy_tree_is_expanded_once_by_flatten():
    lazy = LazyKuhn()
    flatten(lazy)
    assert lazy.made[0] == 57  # every node but the root, made exactly once


def test_flatten_layout():
    tree = flatten(kuhn.game_tree())
    assert tree.n_nodes == 58 and tree.n_infosets == 12 and tree.n_slots == 24
    assert tree.infoset_depth_aligned
    assert list(tree.depth_start) == [0, 1, 4, 10, 22, 46, 58]
    for d, internal in enumerate(tree.internal):  # internal nodes lead their depth
        assert list(internal) == list(
            range(tree.depth_start[d], tree.depth_start[d] + len(internal))
        )
    # every child's parent and edge agree with the padded children lists
    for internal, children in zip(tree.internal, tree.children, strict=True):
        for j, node in enumerate(internal):
            kids = [c for c in children[:, j] if c < tree.n_nodes]
            assert all(tree.parent[c] == node for c in kids)
    assert np.allclose(np.add.reduceat(tree.uniform(), tree.slot_start[:-1]), 1.0)
    policy = uniform_policy(kuhn.game_tree())
    assert tree.policy_dict(tree.policy_array(policy)) == policy


def test_flatten_rejects_inconsistent_information_sets():
    bad = EagerNode.chance(
        ("x", "y"),
        (
            EagerNode.decision(0, "I", ("a",), (EagerNode.terminal((1.0, -1.0)),)),
            EagerNode.decision(0, "I", ("b",), (EagerNode.terminal((1.0, -1.0)),)),
        ),
        (0.5, 0.5),
    )
    with pytest.raises(ValueError, match="disagree"):
        flatten(bad)
