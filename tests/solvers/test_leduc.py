"""Leduc poker's rule tables and tree (the tree is checked against OpenSpiel's history for
history in test_openspiel_parity)."""

from __future__ import annotations

import pytest

from stratagem.games import leduc
from stratagem.solvers.best_response import nash_conv
from stratagem.solvers.tree import expected_returns, flatten
from stratagem.tree import uniform_policy


def test_tree_size():
    tree = flatten(leduc.game_tree())
    assert tree.n_nodes == 9457 and tree.n_infosets == 936
    assert int((tree.player == -2).sum()) == 5520  # terminal histories


def test_contributions_follow_the_raise_sizes():
    assert leduc.contributions(("",)) == (1, 1)
    assert leduc.contributions(("R",)) == (3, 1)  # a round-1 raise is 2
    assert leduc.contributions(("RR",)) == (3, 5)  # a re-raise calls 2 and raises 2
    assert leduc.contributions(("CRC", "R")) == (7, 3)  # round 2 raises by 4
    assert leduc.contributions(("CRRC", "CRRC")) == (13, 13)  # the largest pot


def test_payoffs_pair_beats_high_card_and_ties_split():
    # Qs paired by the public Qh beats Kh; folds lose what was put in; equal ranks split
    assert leduc.payoffs(("Qs", "Kh"), "Qh", ("RC", "CC")) == (3, -3)
    assert leduc.payoffs(("Qs", "Kh"), "Js", ("RC", "CC")) == (-3, 3)
    assert leduc.payoffs(("Qs", "Qh"), "Js", ("RC", "RC")) == (0, 0)
    assert leduc.payoffs(("Js", "Kh"), None, ("RF",)) == (1, -1)  # player 1 folds to a raise
    # round 2: player 0 raises 4 (5 in), player 1 re-raises (9 in), player 0 folds
    assert leduc.payoffs(("Js", "Kh"), "Qs", ("CC", "RRF")) == (-5, 5)


def test_infoset_keys_carry_private_then_public_card():
    assert leduc.infoset_key("Qs", None, ("CR",)) == "Qs:CR"
    assert leduc.infoset_key("Qs", "Kh", ("RC", "R")) == "Qs Kh:RC/R"


def test_uniform_policy_nash_conv():
    # 4.747222… = 4 + 269/360, OpenSpiel's exploitability.nash_conv of its uniform random policy
    root = leduc.game_tree()
    policy = uniform_policy(root)
    v0, v1 = expected_returns(root, policy)
    assert v0 == pytest.approx(-v1, abs=1e-12)
    assert nash_conv(root, policy) == pytest.approx(4.747222222222222, abs=1e-12)
