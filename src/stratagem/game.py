"""The game contract: one protocol covers simultaneous and sequential play.

``State.to_act()`` names the seats that move now: ``()`` when the episode is over, ``(0, 1)`` for a
simultaneous round, ``(s,)`` for a sequential turn. Agents only ever see ``Observation`` objects;
the state applies the actions of every seat in ``to_act()`` at once.

A ``Game`` holds rules only (name, version, params, new_episode, parse, token). Everything else a
game may offer is an optional *capability*: a runtime-checkable protocol below (scenarios, tool
calls, a solver tree, a free-form completion check, ...) that generic code tests with
``isinstance``. SEPO metric hooks live in ``metrics.sepo.SEPOGame``. Generic code never asks a
game's name.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    Protocol,
    TypeVar,
    runtime_checkable,
)

if TYPE_CHECKING:
    from stratagem.tree import Node

Seat = int  # 0 or 1
A = TypeVar("A")
A_contra = TypeVar("A_contra", contravariant=True)  # a state only takes actions in
V = TypeVar("V")
Role = Literal["system", "user", "assistant"]
PROMPT_STYLES = ("chat", "single")  # the ``prompt_style`` game parameter (SPEC §4.1)


@dataclass(frozen=True, slots=True)
class Message:
    """One chat turn, as the seat's own conversation holds it."""

    role: Role
    content: str

    def to_dict(self) -> dict[str, str]:
        """The ``{"role", "content"}`` form chat templates and endpoints read."""
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class Observation(Generic[V]):
    """What one seat sees when it must act.

    The seat's chat is ``system(rules)``, then ``history`` (its earlier user turns and its own
    answers, alternating), then ``user(prompt)``: ``prompt`` holds only what is new since the seat
    last acted (the opponent's move, the round's result, or a correction when ``attempt > 0``).
    With the ``single`` prompt style, ``history`` is empty and ``prompt`` holds the whole story.
    """

    game: str
    seat: Seat
    round: int
    rules: str  # system prompt: rules, payoffs, vocabulary, answer format, private information
    prompt: str  # user turn: what is new since this seat last acted (or a correction)
    legal: tuple[str, ...]  # action tokens accepted now; empty for free-form turns
    view: V  # the same information, typed, for rule-based strategies
    seed: int  # derived from the episode seed; strategies and samplers draw from it
    history: tuple[Message, ...] = ()  # this seat's conversation so far (its own answers included)
    attempt: int = 0  # > 0 when the seat answers again after a correction

    @property
    def free_form(self) -> bool:
        """Whether the answer is free text the game parses (no fixed action vocabulary)."""
        return not self.legal


def chat_for(obs: Observation) -> list[dict[str, str]]:
    """The chat a model answers at ``obs``: system, the seat's history, then the new user turn.

    The one place a chat is assembled: LLM agents, SFT data, trainers and the play page use it.
    """
    return [
        {"role": "system", "content": obs.rules},
        *(m.to_dict() for m in obs.history),
        {"role": "user", "content": obs.prompt},
    ]


@dataclass(frozen=True, slots=True)
class RoundResult:
    """One finished round: the moves in the order they were made, payoffs by seat, facts."""

    round: int
    moves: tuple[tuple[Seat, str], ...]
    payoffs: tuple[float, float]
    info: dict[str, Any] = field(default_factory=dict)  # game facts metrics need (values, cards)

    def action(self, seat: Seat) -> str | None:
        """Returns the last action token ``seat`` played in this round, or None if it did not
        move."""
        for s, token in reversed(self.moves):
            if s == seat:
                return token
        return None

    def played(self, seat: Seat) -> str:
        """Returns the last action token ``seat`` played in this round, for rounds where every
        seat moves (the simultaneous games).

        Raises:
            ValueError: ``seat`` did not move this round.
        """
        token = self.action(seat)
        if token is None:
            raise ValueError(f"seat {seat} did not move in this round")
        return token

    def actions(self, seat: Seat) -> list[str]:
        """Returns every action token ``seat`` played in this round, in order."""
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
        """Returns the weights used at ``phase`` ("train" or "eval")."""
        if phase == "train" and self.collusion_train is not None:
            return SafetyWeights(self.exploit, self.collusion_train, self.externality)
        return self


class State(Protocol[A_contra, V]):
    """One episode in progress."""

    def to_act(self) -> tuple[Seat, ...]:
        """Returns the seats that move now: ``()`` when the episode is over, ``(0, 1)`` for a
        simultaneous round, ``(s,)`` for a sequential turn."""
        ...

    def observe(self, seat: Seat) -> Observation[V]:
        """Returns what ``seat`` sees now; only valid for a seat in ``to_act()``. The game fills
        rules, prompt, legal, view, seed and attempt; the episode adds the history."""
        ...

    def apply(self, actions: Mapping[Seat, A_contra | Invalid]) -> RoundResult | None:
        """Applies one action per seat in ``to_act()``; returns the round when it ends, else
        None (a sequential turn, or a correction the same seat must answer)."""
        ...

    def private(self, seat: Seat) -> Any:
        """Returns what ``seat`` privately knows of the deal so far (own cards or values), so the
        conformance suite can check that no observation leaks the other seat's."""
        ...

    def scenario(self) -> dict[str, Any]:
        """Returns the whole deal of the episode (every seat's private information), for the
        trace."""
        ...


class Game(Protocol[A, V]):
    """Rules, a seeded state generator, legal actions and payoffs."""

    name: ClassVar[str]
    version: ClassVar[int]  # bumps when rules or prompts change

    @property
    def params(self) -> Mapping[str, Any]:
        """The game's parameters (e.g. λ for DoND, the prompt style): JSON values, recorded in
        traces and run fingerprints; ``get_game(name, **params)`` rebuilds the same game."""
        ...

    def new_episode(self, seed: int) -> State[A, V]:
        """Returns a fresh episode, fully determined by ``seed``."""
        ...

    def parse(self, text: str, legal: tuple[str, ...]) -> A | Invalid | None:
        """Returns the action in a model's answer, ``Invalid(reason)`` for a free-form answer the
        game refuses with a correction, or None when there is none or it is ambiguous."""
        ...

    def token(self, action: A) -> str:
        """Returns the canonical text of an action (what traces store)."""
        ...


# ---- optional capabilities: generic code checks ``isinstance(game, HasX)`` ----


@runtime_checkable
class HasScenarios(Protocol):
    """A game whose episodes can be played from a given scenario (same deal for every pairing)."""

    def from_scenario(self, scenario: Any, seed: int) -> State:
        """Returns an episode playing ``scenario``, its remaining randomness from ``seed``."""
        ...


@runtime_checkable
class HasHeldOutScenarios(HasScenarios, Protocol):
    """A game whose scenarios a seed splits into a training side and a held-out side that
    evaluation plays on (DoND's contexts): generic generators of training data (drills,
    demonstrations) play the training side, so no evaluation scenario is ever trained on."""

    def training_scenario(self, split_seed: int, seed: int) -> Any:
        """Returns the scenario of a training episode seeded ``seed``, from the training side of
        the split ``split_seed`` makes."""
        ...


@runtime_checkable
class HasRegimeScenarios(HasScenarios, Protocol):
    """A game whose tournaments play one fixed list of scenarios drawn by regime, the same for
    every pairing (bargaining: ``gft`` scenarios with gains from trade, ``ngft`` without)."""

    def tournament_scenarios(self, gft: int, ngft: int, seed: int = 42) -> list[Any]:
        """Returns exactly ``gft`` then ``ngft`` scenarios, deterministic in ``seed``."""
        ...


@runtime_checkable
class HasPayoffBounds(Protocol):
    """A game that states the range of a seat's payoff per round (checked by the conformance
    suite)."""

    payoff_bounds: tuple[float, float]


@runtime_checkable
class HasTools(Protocol):
    """A free-form game whose answers are tool calls; endpoints with native tool calling get
    the schemas and their calls are checked exactly like parsed text."""

    def tool_schemas(self) -> list[dict]:
        """Returns the OpenAI-style JSON schemas of the tools."""
        ...

    def parse_tool_calls(self, tool_calls: list, thought: str = "") -> Any:
        """Returns the action for native JSON tool calls, or ``Invalid(reason)``."""
        ...


@runtime_checkable
class ChecksCompletion(Protocol):
    """A free-form game that can tell when an answer is complete, so generation may stop early
    (a closed code block). Without it a free-form answer runs to end-of-sequence."""

    def complete(self, text: str) -> bool:
        """Returns whether ``text`` is a finished answer (more tokens would not change it)."""
        ...


@runtime_checkable
class HasAnswerText(Protocol):
    """A game that can write a well-formed model answer for an action (rule-based seats' chat
    history, SFT demonstrations). Without it the answer is the action token."""

    def answer_text(self, action: Any) -> str:
        """Returns a model answer that parses to ``action``."""
        ...


@runtime_checkable
class SamplesActions(Protocol):
    """A free-form game that can draw a random valid action (random play in the conformance
    suite)."""

    def sample_action(self, obs: Observation, rng: random.Random) -> Any:
        """Returns a random action valid at ``obs``."""
        ...


@runtime_checkable
class HasInputFiles(Protocol):
    """A game that reads files its parameters name (a DoND context file). Its ``params`` hold
    each file's content hash, so a changed file is another run; a run folder keeps a copy of
    each file, so rebuilding its metrics needs nothing outside the folder."""

    def input_files(self) -> dict[str, str]:
        """Returns the path of each file the game read, by the parameter that names it."""
        ...


@runtime_checkable
class HasSolverTree(Protocol):
    """A game small enough for exact solving: its tree and one observation per information set,
    so an agent's action probabilities become a tabular policy (exact exploitability)."""

    def game_tree(self) -> Node:
        """Returns the root of the game's tree (one round; players are positions)."""
        ...

    def infoset_observations(self) -> dict[str, Observation]:
        """Returns an observation for each information set of ``game_tree()``, by infoset key."""
        ...


def check_prompt_style(value: str) -> str:
    """Returns ``value`` if it is a prompt style, else raises ``ConfigError`` naming the choices."""
    if value not in PROMPT_STYLES:
        from stratagem.errors import UnknownNameError

        raise UnknownNameError("prompt style", value, PROMPT_STYLES)
    return value


def answer_text(game: Game, action: Any) -> str:
    """The assistant turn a seat's chat holds for ``action`` when no model text exists."""
    return game.answer_text(action) if isinstance(game, HasAnswerText) else game.token(action)


def keeps_history(game: Game) -> bool:
    """Whether observations carry the seat's chat history (the ``chat`` prompt style)."""
    return game.params.get("prompt_style", "chat") != "single"
