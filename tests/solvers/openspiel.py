"""Helpers that line stratagem's trees up with OpenSpiel's games (tests only)."""

from __future__ import annotations

import pytest

from stratagem.tree import CHANCE, TERMINAL, Node, Policy

pyspiel = pytest.importorskip("pyspiel")

OPENSPIEL_GAME = {"kuhn": "kuhn_poker", "leduc": "leduc_poker"}


def _outcome_label(game: str, outcome: int) -> str:
    if game == "kuhn":
        return "JQK"[outcome]
    from stratagem.games.leduc import DECK

    return DECK[outcome]


def _action_label(game: str, node: Node, action: int) -> str:
    if game == "kuhn":  # 0 = pass (or fold facing a bet), 1 = bet (or call)
        return node.actions()[action]
    return ("FOLD", "CALL", "RAISE")[action]


def key_map(game: str, root: Node) -> dict[str, str]:
    """Walk our tree and OpenSpiel's side by side; return our infoset key -> OpenSpiel's.

    Asserts on the way that chance probabilities, legal actions and terminal returns agree, and
    that the key correspondence is one to one.
    """
    os_game = pyspiel.load_game(OPENSPIEL_GAME[game])
    ours_to_theirs: dict[str, str] = {}
    theirs_to_ours: dict[str, str] = {}

    def visit(node: Node, state) -> None:
        if state.is_terminal():
            assert node.player == TERMINAL
            assert node.returns() == pytest.approx(tuple(state.returns()), abs=0)
            return
        if state.is_chance_node():
            assert node.player == CHANCE
            outcomes = state.chance_outcomes()
            labels = tuple(_outcome_label(game, a) for a, _ in outcomes)
            assert labels == node.actions()
            assert node.chances() == pytest.approx(tuple(p for _, p in outcomes), abs=1e-15)
            for (a, _), label in zip(outcomes, labels, strict=True):
                visit(node.child(label), state.child(a))
            return
        assert node.player == state.current_player()
        legal = state.legal_actions()
        labels = tuple(_action_label(game, node, a) for a in legal)
        assert labels == node.actions()
        ours, theirs = node.infoset(), state.information_state_string()
        assert ours_to_theirs.setdefault(ours, theirs) == theirs
        assert theirs_to_ours.setdefault(theirs, ours) == ours
        for a, label in zip(legal, labels, strict=True):
            visit(node.child(label), state.child(a))

    visit(root, os_game.new_initial_state())
    return ours_to_theirs


def to_openspiel(game: str, root: Node, policy: Policy):
    """Our policy as an OpenSpiel ``TabularPolicy``."""
    from open_spiel.python.policy import TabularPolicy

    os_game = pyspiel.load_game(OPENSPIEL_GAME[game])
    table = TabularPolicy(os_game)
    for ours, theirs in key_map(game, root).items():
        row = table.policy_for_key(theirs)
        row[:] = 0.0
        for label, p in policy[ours].items():
            row[_index(game, label)] = p
    return table


def from_openspiel(game: str, root: Node, os_policy) -> dict[str, dict[str, float]]:
    """OpenSpiel's tabular policy (Python ``TabularPolicy``) as our ``infoset -> {action: p}``."""
    from stratagem.tree import infosets

    acts = infosets(root)
    out = {}
    for ours, theirs in key_map(game, root).items():
        row = os_policy.policy_for_key(theirs)
        out[ours] = {label: float(row[_index(game, label)]) for label in acts[ours][1]}
    return out


def _index(game: str, label: str) -> int:
    if game == "kuhn":
        return 0 if label in ("PASS", "FOLD") else 1
    return ("FOLD", "CALL", "RAISE").index(label)
