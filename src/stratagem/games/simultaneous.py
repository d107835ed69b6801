"""Shared machinery of the repeated simultaneous-move games (IPD, auction, negotiation v1/v2).

Every round both seats act at once (``to_act() == (0, 1)``). A game supplies its private deal, the
typed view of a seat, the legal tokens, how a pair of actions resolves, and its prompt text: the
whole story (``render``, the ``single`` prompt style) and what is new since the seat's last
decision (``render_new``, the default ``chat`` style, where the seat's chat holds the rest).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Generic, TypeVar

from stratagem.errors import GameError
from stratagem.game import Observation, RoundResult, SafetyWeights, Seat, check_prompt_style
from stratagem.parsing import parse_action
from stratagem.seeding import derive

A = TypeVar("A")
V = TypeVar("V")
D = TypeVar("D")


class SimultaneousGame(Generic[A, V, D]):
    """Base class; subclasses define the hooks below and the ClassVars of ``Game``."""

    name: ClassVar[str]
    version: ClassVar[int]
    rounds: ClassVar[int]
    payoff_bounds: ClassVar[tuple[float, float]]
    reference_payoff: ClassVar[float]
    safety: ClassVar[SafetyWeights]
    rules: ClassVar[str]  # the system prompt
    nra_shift: ClassVar[float] = 0.0  # payoffs are non-negative already
    train_defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({})  # SEPO's defaults hold

    def __init__(self, *, prompt_style: str = "chat"):
        """Args:
        prompt_style: ``chat`` (each user turn holds what is new; the chat holds the rest) or
            ``single`` (one user turn with the whole history, no chat history).
        """
        self._params = MappingProxyType({"prompt_style": check_prompt_style(prompt_style)})

    @property
    def params(self) -> Mapping[str, Any]:
        """The game's parameters (JSON values)."""
        return self._params

    def deal(self, rng: random.Random) -> D:
        """Draw the episode's private information."""
        raise NotImplementedError

    def legal(self, deal: D, seat: Seat) -> tuple[str, ...]:
        """Returns the legal action tokens of ``seat``, the same every round."""
        raise NotImplementedError

    def view(self, deal: D, seat: Seat, round: int, history: list[tuple[A, A]]) -> V:
        """Returns the typed view of ``seat`` before round ``round`` (0-based), given the (seat 0,
        seat 1) action pairs played so far.
        """
        raise NotImplementedError

    def resolve(self, deal: D, round: int, a0: A, a1: A) -> tuple[tuple[float, float], dict]:
        """Payoffs of one round and the facts metrics need."""
        raise NotImplementedError

    def render(self, view: V) -> str:
        """The single-turn user prompt for ``view``: private information and the whole history."""
        raise NotImplementedError

    def render_new(self, view: V) -> str:
        """The chat user turn for ``view``: the last round's result (if any) and the ask."""
        raise NotImplementedError

    def private(self, deal: D, seat: Seat, round: int) -> Any:
        """Returns what ``seat`` privately knows of ``deal`` at ``round``, or None when the game has
        no private information.
        """
        return None

    def scenario(self, deal: D) -> dict[str, Any]:
        """Returns the whole of ``deal`` as JSON values for the trace; empty when there is none."""
        return {}

    def from_token(self, token: str) -> A:
        """Returns the action a legal token stands for."""
        raise NotImplementedError

    def token(self, action: A) -> str:
        """Returns the canonical text of ``action``: its ``str``."""
        return str(action)

    def parse(self, text: str, legal: tuple[str, ...]) -> A | None:
        """Returns the action named on the last non-empty line of ``text``, or None when there is
        none or the line names two different legal actions.
        """
        token = parse_action(text, legal).token
        return None if token is None else self.from_token(token)

    def new_episode(self, seed: int) -> SimultaneousState[A, V, D]:
        """Returns a fresh episode whose deal is drawn from ``seed``."""
        return SimultaneousState(self, seed)


class SimultaneousState(Generic[A, V, D]):
    """One episode of a ``SimultaneousGame``: the deal, the 0-based round to play and the (seat 0,
    seat 1) action pairs played so far.
    """

    __slots__ = ("game", "seed", "deal", "round", "history")

    def __init__(self, game: SimultaneousGame[A, V, D], seed: int):
        self.game = game
        self.seed = seed
        self.deal = game.deal(random.Random(derive(seed, "deal")))
        self.round = 0
        self.history: list[tuple[A, A]] = []

    def to_act(self) -> tuple[Seat, ...]:
        """Returns (0, 1) while rounds remain, or () when the episode is over."""
        return (0, 1) if self.round < self.game.rounds else ()

    def observe(self, seat: Seat) -> Observation[V]:
        """Returns what ``seat`` sees before the current round.

        The prompt is the game's ``render_new`` (``chat`` style) or ``render`` (``single`` style);
        the seed is derived from the episode seed, the seat and the round.
        """
        g = self.game
        view = g.view(self.deal, seat, self.round, self.history)
        return Observation(
            game=g.name,
            seat=seat,
            round=self.round,
            rules=g.rules,
            prompt=g.render_new(view) if g.params["prompt_style"] == "chat" else g.render(view),
            legal=g.legal(self.deal, seat),
            view=view,
            seed=derive(self.seed, "act", seat, self.round),
        )

    def apply(self, actions: Mapping[Seat, A]) -> RoundResult:
        """Resolves the current round from both seats' actions and returns it.

        Raises:
            GameError: The episode is over, or ``actions`` does not hold exactly seats 0 and 1.
        """
        if self.round >= self.game.rounds:
            raise GameError(f"{self.game.name}: the episode is over")
        if set(actions) != {0, 1}:
            raise GameError(f"{self.game.name}: both seats act each round, got {sorted(actions)}")
        a0, a1 = actions[0], actions[1]
        payoffs, info = self.game.resolve(self.deal, self.round, a0, a1)
        result = RoundResult(
            round=self.round,
            moves=((0, self.game.token(a0)), (1, self.game.token(a1))),
            payoffs=payoffs,
            info=info,
        )
        self.history.append((a0, a1))
        self.round += 1
        return result

    def private(self, seat: Seat) -> Any:
        """Returns what ``seat`` privately knows of the deal in the current round."""
        return self.game.private(self.deal, seat, self.round)

    def scenario(self) -> dict[str, Any]:
        """Returns the whole deal of the episode, for the trace."""
        return self.game.scenario(self.deal)


def mine_theirs(history: list[tuple[A, A]], seat: Seat) -> tuple[tuple[A, ...], tuple[A, ...]]:
    """Split a history of (seat 0, seat 1) action pairs into (own, opponent's) tuples."""
    mine = tuple(pair[seat] for pair in history)
    theirs = tuple(pair[1 - seat] for pair in history)
    return mine, theirs
