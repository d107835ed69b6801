"""The game contract: one protocol covers simultaneous and sequential play.

``State.to_act()`` names the seats that move now: ``()`` when the episode is over, ``(0, 1)`` for a
simultaneous round, ``(s,)`` for a sequential turn. Agents only ever see ``Observation`` objects;
the state applies the actions of every seat in ``to_act()`` at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

Seat = int  # 0 or 1
A = TypeVar("A")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Observation(Generic[V]):
    """What one seat sees when it must act."""

    game: str
    seat: Seat
    round: int
    rules: str  # system prompt: rules, payoffs, vocabulary, answer format
    prompt: str  # user turn: private information and the history so far
    legal: tuple[str, ...]  # action tokens accepted now
    view: V  # the same information, typed, for rule-based strategies
    seed: int  # derived from the episode seed; strategies draw their randomness from it


@dataclass(frozen=True, slots=True)
class RoundResult:
    """One finished round: the moves in the order they were made, payoffs by seat, facts."""

    round: int
    moves: tuple[tuple[Seat, str], ...]
    payoffs: tuple[float, float]
    info: dict[str, Any] = field(default_factory=dict)  # game facts metrics need (values, cards)

    def action(self, seat: Seat) -> str | None:
        """The last action token ``seat`` played in this round (None if it did not move)."""
        for s, token in reversed(self.moves):
            if s == seat:
                return token
        return None

    def actions(self, seat: Seat) -> list[str]:
        return [token for s, token in self.moves if s == seat]


@dataclass(frozen=True, slots=True)
class Invalid:
    """An answer a free-form game refuses; the game shows ``reason`` to the agent (a correction)
    and decides what happens next. Token games never need it: their answers are constrained."""

    reason: str


@dataclass(frozen=True)
class SafetyWeights:
    """The λ of Safety J = u − λe·e − λc·c − λx·x (SPEC §3)."""

    exploit: float
    collusion: float
    externality: float
    collusion_train: float | None = None  # negotiation trains with a larger λc than it reports

    def for_phase(self, phase: str) -> SafetyWeights:
        if phase == "train" and self.collusion_train is not None:
            return SafetyWeights(self.exploit, self.collusion_train, self.externality)
        return self


class State(Protocol[A, V]):
    """One episode in progress."""

    def to_act(self) -> tuple[Seat, ...]: ...

    def observe(self, seat: Seat) -> Observation[V]: ...

    def apply(self, actions: Mapping[Seat, A]) -> RoundResult | None:
        """Apply one action per seat in ``to_act()``; return the round when it ends."""
        ...

    def private(self, seat: Seat) -> Any:
        """What the seat knows of the deal so far (own cards or values, public draws)."""
        ...

    def scenario(self) -> dict[str, Any]:
        """The whole deal of the episode (every seat's private information), for the trace."""
        ...


class Game(Protocol[A, V]):
    """Rules, a seeded state generator, legal actions and payoffs."""

    name: ClassVar[str]
    version: ClassVar[int]  # bumps when rules or prompts change
    rounds: ClassVar[int]
    payoff_bounds: ClassVar[tuple[float, float]]  # per round, per seat
    reference_payoff: ClassVar[float]  # fair per-round payoff, for normalisation s = 3 / ref
    safety: ClassVar[SafetyWeights]

    def new_episode(self, seed: int) -> State[A, V]: ...

    def parse(self, text: str, legal: tuple[str, ...]) -> A | None:
        """The action in a model's answer, or None when there is none or it is ambiguous."""
        ...

    def token(self, action: A) -> str:
        """The canonical text of an action (what traces store)."""
        ...

    def collusive_act(self, result: RoundResult, seat: Seat) -> bool:
        """Whether ``seat`` played the game's greedy/collusive act in this round (SPEC §3)."""
        ...

    def externality(self, result: RoundResult) -> float:
        """The round's cost to the outside (welfare shortfall, inefficiency, breakdown)."""
        ...
