"""Agents choose actions. Every agent is batched: ``act`` takes all observations waiting for it.

A rule-based ``Strategy`` is a pure function of (typed view, seeded rng); it exposes its exact
action distribution through ``probabilities`` where it is a mixed strategy, so solvers can read it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar, runtime_checkable

from stratagem.game import Observation

A = TypeVar("A")
Status = Literal["ok", "fallback", "failed"]


@dataclass(frozen=True, slots=True)
class Decision(Generic[A]):
    """One chosen action and how it was reached."""

    action: A
    text: str | None = None  # raw model output
    status: Status = "ok"
    probs: Mapping[str, float] | None = None  # action distribution over tokens, when known
    tokens: int = 0  # generated tokens
    seconds: float = 0.0
    info: Mapping[str, Any] | None = None  # backend facts (prompt tokens, retries, cache hits)
    error: str | None = None  # the backend failed for this decision: its episode ends as an error


class Agent(Protocol):
    """Anything that chooses actions.

    ``name`` is read-only here so that a class computing it (a ``Strategy``) and a frozen
    dataclass holding it are both agents.
    """

    @property
    def name(self) -> str:
        """The agent's name in traces and tables."""
        ...

    def act(self, batch: Sequence[Observation]) -> list[Decision]:
        """Returns one decision per observation, in order (always batched)."""
        ...


@runtime_checkable
class ReportsActionProbs(Protocol):
    """An agent that can state its action distribution without playing (an LLM agent's
    constrained decode, SPEC §4.3): exact exploitability and policy extraction use it."""

    def action_probs(self, batch: Sequence[Observation]) -> list[dict[str, float]]:
        """Returns, per observation, the probability of each legal action token."""
        ...


class Strategy:
    """A rule-based strategy. Subclasses override ``probabilities`` or ``choose``.

    Parameters are dataclass fields on the subclass; the class name is the registry key.
    """

    game: ClassVar[str] = ""

    @property
    def name(self) -> str:
        """The class name: the strategy's registry key and agent name."""
        return type(self).__name__

    def probabilities(self, view: Any) -> Mapping[Any, float] | None:
        """The exact action distribution at ``view``, or None for a deterministic ``choose``."""
        return None

    def choose(self, view: Any, rng: random.Random) -> Any:
        """Returns one action at ``view`` drawn from ``probabilities`` with ``rng``.

        Raises:
            NotImplementedError: The subclass defines neither ``probabilities`` nor ``choose``.
        """
        probs = self.probabilities(view)
        if probs is None:
            raise NotImplementedError(f"{self.name} defines neither probabilities nor choose")
        return sample(probs, rng)

    def act(self, batch: Sequence[Observation]) -> list[Decision]:
        """Returns one decision per observation, each drawn with a ``random.Random`` seeded by the
        observation's seed; a decision from ``probabilities`` records the distribution by token.
        """
        out = []
        for obs in batch:
            probs = self.probabilities(obs.view)
            if probs is None:
                action = self.choose(obs.view, random.Random(obs.seed))
                out.append(Decision(action))
            else:
                action = sample(probs, random.Random(obs.seed))
                out.append(Decision(action, probs={str(k): p for k, p in probs.items()}))
        return out

    def __repr__(self) -> str:
        return self.name


def sample(probs: Mapping[Any, float], rng: random.Random) -> Any:
    """Draw one key of ``probs`` (in its order) with one call to ``rng.random()``."""
    x = rng.random()
    acc = 0.0
    last = None
    for action, p in probs.items():
        if p <= 0:
            continue
        acc += p
        last = action
        if x < acc:
            return action
    if last is None:
        raise ValueError("a distribution with no positive probability")
    return last  # rounding: x landed in the last sliver


def pure(action: Any) -> dict[Any, float]:
    """The distribution that plays ``action`` for sure."""
    return {action: 1.0}
