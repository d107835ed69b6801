"""Leduc poker (Southey et al. 2005): a text game of four hands, and its exact tree.

Six cards, J Q K in two suits. Each hand both seats ante 1 and get one private card; a betting
round; one public card; a second betting round. CALL checks when there is nothing to call, RAISE
adds 2 in round 1 and 4 in round 2 (two raises a round at most), FOLD is offered only facing a
raise. At the showdown a private card pairing the public card wins, else the higher rank; equal
ranks split. A round of the episode is a hand, and the seats alternate acting first: seat 0 on
hands 1 and 3, seat 1 on hands 2 and 4.

Four hands, not two: each seat still acts first as often as second (the payoff of a pairing is
position-balanced), and twice the chips per episode halves the variance of a per-episode mean
for the same number of episodes, while the longest chat (about 16 user turns) stays well inside
a small model's context.

The text game and the solver tree (``game_tree``: OpenSpiel's ``leduc_poker`` history for history,
936 information sets) read the same tables in ``rules``; ``infoset_observations`` gives each
information set of the first hand the chat the seat sees there in play, so exact exploitability
is computed on the game agents play.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from stratagem.game import Observation, RoundResult, SafetyWeights, Seat, check_prompt_style
from stratagem.games.leduc.probes import deal_for, infoset_observations, key_of, parse_key
from stratagem.games.leduc.prompts import HANDS, render, render_new, rules_text
from stratagem.games.leduc.rules import (
    ANTE,
    CLOSED,
    DECK,
    LEGAL,
    RAISE_SIZE,
    RANKS,
    ROUNDS,
    Act,
    C,
    F,
    R,
    contributions,
    game_tree,
    infoset_key,
    payoffs,
    rank,
)
from stratagem.games.leduc.state import NAME, LeducState, first_seat
from stratagem.games.leduc.view import LeducView, PastHand
from stratagem.games.registry import GAMES
from stratagem.parsing import parse_action
from stratagem.seeding import derive
from stratagem.tree import Node

__all__ = [
    "ANTE",
    "CLOSED",
    "DECK",
    "HANDS",
    "LEGAL",
    "RAISE_SIZE",
    "RANKS",
    "ROUNDS",
    "Act",
    "C",
    "F",
    "Leduc",
    "LeducState",
    "LeducView",
    "PastHand",
    "R",
    "contributions",
    "deal_for",
    "first_seat",
    "game_tree",
    "infoset_key",
    "infoset_observations",
    "key_of",
    "parse_key",
    "payoffs",
    "rank",
    "render",
    "render_new",
]

_CHECK = re.compile(r"(?<![\w\-.])check(?!\w)", re.I)
MAX_STAKE = 13  # the most a seat can put in one hand: ante 1, 2 + 2 in round 1, 4 + 4 in round 2


@GAMES
class Leduc:
    """Leduc poker, four hands an episode; declares an exact solver tree."""

    name: ClassVar[str] = NAME
    version: ClassVar[int] = 1
    rounds = HANDS
    payoff_bounds = (-float(MAX_STAKE), float(MAX_STAKE))
    reference_payoff = float(ANTE)  # as Kuhn's "ante-only": the chips at stake without betting
    safety = SafetyWeights(exploit=1.5, collusion=0.0, externality=0.0)  # Kuhn's (SPEC §3)
    nra_shift = float(MAX_STAKE)  # a hand's winnings shifted so NRA's sums are non-negative
    train_defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({})  # SEPO's defaults hold
    rules = rules_text(HANDS)

    def __init__(self, *, prompt_style: str = "chat"):
        """Args:
        prompt_style: ``chat`` (each user turn holds what is new) or ``single`` (one user turn
            with every earlier hand).
        """
        self._params = MappingProxyType({"prompt_style": check_prompt_style(prompt_style)})

    @property
    def params(self) -> Mapping[str, Any]:
        """The game's parameters (JSON values)."""
        return self._params

    def new_episode(self, seed: int) -> LeducState:
        """Returns a fresh episode of four hands, each dealing both private cards and the public
        card from the full deck, drawn from ``seed``."""
        rng = random.Random(derive(seed, "deal"))
        deals = tuple(tuple(rng.sample(DECK, 3)) for _ in range(HANDS))
        return LeducState(seed, deals, self._params["prompt_style"] == "chat")  # type: ignore[arg-type]

    def collusive_act(self, result: RoundResult, seat: Seat) -> bool:
        """Returns False: in a zero-sum game there is nothing to collude on."""
        return False

    def externality(self, result: RoundResult) -> float:
        """Returns 0.0: in a zero-sum game no one outside the table pays."""
        return 0.0

    def game_tree(self) -> Node:
        """Returns one hand as a solver tree (players are positions: 0 acts first)."""
        return game_tree()

    def infoset_observations(self) -> dict[str, Observation[LeducView]]:
        """Returns an observation for each of the 936 information sets of the first hand, as the
        seat sees it there in play (``single``: the whole story in one prompt, no chat)."""
        observations = infoset_observations()
        if self._params["prompt_style"] == "chat":
            return observations
        return {
            k: dataclasses.replace(o, prompt=render(o.view), history=())
            for k, o in observations.items()
        }

    def parse(self, text: str, legal: tuple[str, ...]) -> Act | None:
        """Returns the action named on the last non-empty line of ``text``, or None when there is
        none or the line names two different legal actions. With nothing to call (no FOLD
        offered), CHECK is read as CALL."""
        if "FOLD" not in legal and "CALL" in legal and isinstance(text, str):
            text = _CHECK.sub("CALL", text)
        token = parse_action(text, legal).token
        return None if token is None else Act(token)

    def token(self, action: Act) -> str:
        """Returns the action token of ``action``."""
        return str(action)
