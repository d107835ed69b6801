"""Leduc poker's rule tables and its exact tree (Southey et al. 2005).

Six cards, J Q K in two suits. Both players ante 1 and get one private card; a betting round;
then one public card is dealt and a second betting round follows. In each round a player may
CALL (which checks when there is nothing to call), RAISE by the round's fixed size (2, then 4),
at most two raises per round, or FOLD when facing a raise. A round ends when a raise is called
or both players check. At showdown a private card that pairs the public card wins; otherwise
the higher rank wins; equal ranks split the pot. Player 0 acts first in both rounds.

The tree is OpenSpiel's ``leduc_poker`` (default parameters) history for history: the same
chance order (player 0's card, player 1's card, the public card), the same action order (FOLD,
CALL, RAISE) and the same 936 information sets, whose keys carry the suit of the private card as
OpenSpiel's do (suits never change a payoff). Keys read ``"Qs:CR"`` in round 1 and
``"Qs Kh:RC/R"`` in round 2 (private card, public card, betting per round).

The text game (``stratagem.games.leduc``) pays every hand with ``payoffs`` from these tables, so
the tree the solvers read is the game agents play; a hand's players there are positions (0 acts
first), which the text game maps to seats.
"""

from __future__ import annotations

from enum import StrEnum

from stratagem.tree import EagerNode, Node


class Act(StrEnum):
    """Leduc's actions, in OpenSpiel's order (CALL checks when there is nothing to call)."""

    FOLD = "FOLD"
    CALL = "CALL"
    RAISE = "RAISE"


F, C, R = Act.FOLD, Act.CALL, Act.RAISE
DECK = ("Js", "Jh", "Qs", "Qh", "Ks", "Kh")  # OpenSpiel's card i is DECK[i]; rank = i // 2
RANKS = "JQK"
ANTE = 1
RAISE_SIZE = (2, 4)  # per round
ROUNDS = 2

# legal actions after each non-final betting sequence of a round (letters F, C, R)
LEGAL: dict[str, tuple[Act, ...]] = {
    "": (C, R),
    "C": (C, R),
    "R": (F, C, R),
    "CR": (F, C, R),
    "RR": (F, C),
    "CRR": (F, C),
}
# betting sequences that close a round without a fold
CLOSED = frozenset({"CC", "RC", "CRC", "RRC", "CRRC"})


def rank(card: str) -> int:
    """The rank of ``card``: 0 for J, 1 for Q, 2 for K."""
    return RANKS.index(card[0])


def contributions(rounds: tuple[str, ...]) -> tuple[int, int]:
    """Chips each player has put in after the betting sequences ``rounds`` (ante included)."""
    put = [ANTE, ANTE]
    for size, sequence in zip(RAISE_SIZE, rounds, strict=False):
        for i, letter in enumerate(sequence):
            player = i % 2
            if letter == "C":
                put[player] = put[1 - player]
            elif letter == "R":
                put[player] = put[1 - player] + size
    return put[0], put[1]


def payoffs(cards: tuple[str, str], public: str | None, rounds: tuple[str, ...]) -> tuple[int, int]:
    """Both players' winnings at the end of a hand: after a fold (last letter F) or a showdown."""
    put = contributions(rounds)
    last = rounds[-1]
    if last.endswith("F"):
        folder = (len(last) - 1) % 2
        winner = 1 - folder
    else:
        assert public is not None
        strength = [(rank(c) == rank(public), rank(c)) for c in cards]
        if strength[0] == strength[1]:
            return 0, 0
        winner = 0 if strength[0] > strength[1] else 1
    won = put[1 - winner]
    return (won, -won) if winner == 0 else (-won, won)


def infoset_key(card: str, public: str | None, rounds: tuple[str, ...]) -> str:
    """The key of the information set of the holder of ``card`` after the betting ``rounds``."""
    return f"{card}{' ' + public if public else ''}:{'/'.join(rounds)}"


def game_tree() -> Node:
    """Returns one Leduc hand as a solver tree (9,457 nodes, 936 information sets)."""
    return _deal_private(())


def _chance(cards: tuple[str, ...], make) -> EagerNode:
    left = tuple(c for c in DECK if c not in cards)
    children = tuple(make(c) for c in left)
    return EagerNode.chance(left, children, (1 / len(left),) * len(left))


def _deal_private(cards: tuple[str, ...]) -> EagerNode:
    if len(cards) == 2:
        return _betting((cards[0], cards[1]), None, ("",))
    return _chance(cards, lambda c: _deal_private((*cards, c)))


def _betting(cards: tuple[str, str], public: str | None, rounds: tuple[str, ...]) -> EagerNode:
    sequence = rounds[-1]
    if sequence.endswith("F") or (sequence in CLOSED and len(rounds) == ROUNDS):
        return EagerNode.terminal(tuple(float(x) for x in payoffs(cards, public, rounds)))  # type: ignore[arg-type]
    if sequence in CLOSED:
        return _chance(cards, lambda c: _betting(cards, c, (*rounds, "")))
    player = len(sequence) % 2
    legal = LEGAL[sequence]
    children = tuple(_betting(cards, public, (*rounds[:-1], sequence + a[0])) for a in legal)
    key = infoset_key(cards[player], public, rounds)
    return EagerNode.decision(player, key, tuple(str(a) for a in legal), children)
