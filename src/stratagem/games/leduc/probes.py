"""One observation per information set of the first hand: the chat the seat sees there in play.

Exact exploitability asks an agent for its action distribution at each of the tree's 936
information sets; the chat it is asked is the one play shows at that point, its earlier
decisions of the hand answered with the bare action token.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from stratagem.game import Message, Observation
from stratagem.games.leduc.prompts import HANDS
from stratagem.games.leduc.rules import DECK, Act, game_tree
from stratagem.games.leduc.state import Deal, LeducState
from stratagem.games.leduc.view import LeducView
from stratagem.tree import infosets

TOKEN = {"F": Act.FOLD, "C": Act.CALL, "R": Act.RAISE}


def parse_key(key: str) -> tuple[str, str | None, tuple[str, ...]]:
    """Returns (private card, public card or None, betting per round) of an information-set key
    such as ``"Qs Kh:RC/R"``."""
    cards, _, betting = key.partition(":")
    card, _, public = cards.partition(" ")
    return card, public or None, tuple(betting.split("/"))


def key_of(view: LeducView) -> str:
    """Returns the tree's information-set key of the decision ``view`` shows (any hand: the key
    holds the cards and the betting, the position follows from the betting's length)."""
    from stratagem.games.leduc.rules import infoset_key

    return infoset_key(view.card, view.public, view.betting)


@cache
def _keys() -> tuple[str, ...]:
    return tuple(infosets(game_tree()))  # the tree's order, depth first


def deal_for(key: str) -> Deal:
    """Returns a first-hand deal that reaches ``key`` for the seat it belongs to: the key's cards
    for that seat, the lowest remaining cards elsewhere (the opponent's card is never shown
    before the hand ends, nor the public card before round 2)."""
    card, public, betting = parse_key(key)
    if public is None:
        public = next(c for c in DECK if c != card)
    other = next(c for c in DECK if c not in (card, public))
    seat = len(betting[-1]) % 2  # the first hand's position 0 is seat 0
    return (card, other, public) if seat == 0 else (other, card, public)


def infoset_observations() -> dict[str, Observation[LeducView]]:
    """Returns an observation for each of the 936 information sets of the first hand (both
    positions), keyed as ``game_tree()`` keys them, each with the seat's chat there in play."""
    out: dict[str, Observation[LeducView]] = {}
    for key in _keys():
        card, public, betting = parse_key(key)
        seat = len(betting[-1]) % 2
        state = LeducState(seed=0, deals=(deal_for(key),) * HANDS)
        history: list[Message] = []
        for letter in "".join(betting):
            actor = state.to_act()[0]
            if actor == seat:
                history.append(Message("user", state.observe(seat).prompt))
                history.append(Message("assistant", TOKEN[letter].value))
            state.apply({actor: TOKEN[letter]})
        obs = state.observe(seat)
        assert key_of(obs.view) == key, (key, obs.view)
        out[key] = dataclasses.replace(obs, history=tuple(history))
    return out
