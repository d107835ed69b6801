"""One episode, driven one step at a time.

An ``Episode`` wraps a game's ``State`` with the bookkeeping every driver needs: the observations
waiting for an answer, each seat's growing chat (SPEC §4.1), the decision records, the finished
rounds, and the trace. The scheduler ``play`` steps many episodes together; the play page, tree
expansion and Ray workers drive single episodes through the same four calls::

    episode = Episode(game, "demo", seed=1, agents=("TitForTat", "me"))
    while not episode.done:
        for obs in episode.waiting():
            episode.submit(obs.seat, agent_for(obs.seat).act([obs])[0])
        episode.step()
    trace = episode.trace()

An ``Episode`` never calls an agent: whoever drives it decides how decisions are made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stratagem.agent import Agent, Decision
from stratagem.errors import GameError
from stratagem.game import (
    Game,
    HasAnswerText,
    HasScenarios,
    Message,
    Observation,
    RoundResult,
    Seat,
    State,
    keeps_history,
)
from stratagem.trace import DecisionRecord, Trace, TraceStatus


@dataclass(frozen=True)
class EpisodeSpec:
    """What to play: an id (unique within a run), a seed, and the agent in each seat."""

    episode_id: str
    seed: int
    agents: tuple[Agent, Agent]
    meta: Mapping[str, Any] = field(default_factory=dict)
    scenario: Any = None  # a game scenario to play instead of one drawn from the seed


class Episode:
    """One episode of ``game``: waiting observations, submitted decisions, steps, a trace."""

    def __init__(
        self,
        game: Game,
        episode_id: str,
        seed: int,
        agents: tuple[str, str],
        *,
        meta: Mapping[str, Any] | None = None,
        scenario: Any = None,
    ):
        """Start an episode; ``agents`` are the names recorded for each seat.

        Raises:
            GameError: a ``scenario`` is given but the game cannot play one.
        """
        self.game = game
        self.episode_id = episode_id
        self.seed = seed
        self.agents = agents
        self.meta = dict(meta or {})
        if scenario is None:
            self.state: State = game.new_episode(seed)
        elif isinstance(game, HasScenarios):
            self.state = game.from_scenario(scenario, seed)
        else:
            raise GameError(f"{game.name} cannot play a given scenario")
        self.rounds: list[RoundResult] = []
        self.decisions: list[DecisionRecord] = []
        self.error: str | None = None
        self._chats: tuple[list[Message], list[Message]] = ([], [])
        self._system: list[str | None] = [None, None]  # model seats only (the trace's)
        self._rules: list[str | None] = [None, None]  # every seat that has decided
        self._pending: dict[Seat, Any] = {}
        self._observed: dict[Seat, Observation] = {}
        self._history = keeps_history(game)
        # checked once: a runtime protocol check per decision costs more than the game itself
        self._answer_text = game.answer_text if isinstance(game, HasAnswerText) else game.token

    @classmethod
    def from_spec(cls, game: Game, spec: EpisodeSpec) -> Episode:
        """Returns the episode ``spec`` describes (agents named by their ``name``)."""
        return cls(
            game,
            spec.episode_id,
            spec.seed,
            (spec.agents[0].name, spec.agents[1].name),
            meta=spec.meta,
            scenario=spec.scenario,
        )

    @property
    def done(self) -> bool:
        """Whether the episode is over (finished by the rules, or ended by an error)."""
        return self.error is not None or not self.state.to_act()

    def chat(self, seat: Seat) -> tuple[Message, ...]:
        """Returns ``seat``'s conversation so far (user turns and its own answers)."""
        return tuple(self._chats[seat])

    def rules(self, seat: Seat) -> str | None:
        """Returns the rules (system prompt) ``seat`` was shown, once it has decided."""
        return self._rules[seat]

    def waiting(self) -> list[Observation]:
        """Returns the observations of the seats that must still answer this step, or ``[]``
        when every seat to act has submitted (call ``step``) or the episode is over."""
        if self.done:
            return []
        out = []
        for seat in self.state.to_act():
            if seat in self._pending:
                continue
            if seat not in self._observed:
                obs = self.state.observe(seat)
                if self._history and self._chats[seat]:
                    obs = dataclasses.replace(obs, history=tuple(self._chats[seat]))
                self._observed[seat] = obs
            out.append(self._observed[seat])
        return out

    def submit(self, seat: Seat, decision: Decision, agent: str | None = None) -> None:
        """Record ``seat``'s decision for the current step.

        A decision that carries an ``error`` (its backend gave up) ends the episode as an
        error. Raises ``GameError`` for a seat that is not waiting or an illegal action token.
        """
        if seat not in self._observed:
            self.waiting()
        obs = self._observed.get(seat)
        if obs is None or seat in self._pending:
            raise GameError(f"{self.game.name}: seat {seat} is not waiting for a decision")
        self.decisions.append(self._record(obs, decision, agent or self.agents[seat]))
        if decision.error is not None:
            self.fail(decision.error)
            return
        self._pending[seat] = decision.action
        if self._rules[seat] is None:
            self._rules[seat] = obs.rules
        if self._system[seat] is None and decision.text is not None:
            self._system[seat] = obs.rules
        self._chats[seat].extend(
            (
                Message("user", obs.prompt),
                Message(
                    "assistant",
                    decision.text
                    if decision.text is not None
                    else self._answer_text(decision.action),
                ),
            )
        )

    def step(self) -> RoundResult | None:
        """Apply the submitted decisions once every seat to act has one; returns the round when
        it ends, else None. Raises ``GameError`` while seats are still waiting."""
        if self.done:
            raise GameError(f"{self.game.name}: the episode is over")
        missing = [s for s in self.state.to_act() if s not in self._pending]
        if missing:
            raise GameError(f"{self.game.name}: still waiting for seats {missing}")
        result = self.state.apply(self._pending)
        self._pending, self._observed = {}, {}
        if result is not None:
            self.rounds.append(result)
        return result

    @property
    def ready(self) -> bool:
        """Whether every seat to act has submitted, so ``step`` can run."""
        return not self.done and all(s in self._pending for s in self.state.to_act())

    def fail(self, error: str) -> None:
        """End the episode as an error (``timeout...`` errors are recorded as timeouts)."""
        self.error = error

    def trace(self) -> Trace:
        """Returns the record of the episode (complete, or error/timeout when it failed)."""
        status: TraceStatus = "complete"
        if self.error is not None:
            status = "timeout" if self.error.startswith("timeout") else "error"
        return Trace(
            episode_id=self.episode_id,
            game=self.game.name,
            version=self.game.version,
            seed=self.seed,
            agents=self.agents,
            rounds=tuple(self.rounds),
            decisions=tuple(self.decisions),
            scenario=self.state.scenario(),
            meta=dict(self.meta),
            status=status,
            error=self.error,
            params=dict(self.game.params),
            system=(self._system[0], self._system[1]),
        )

    def _record(self, obs: Observation, d: Decision, agent: str) -> DecisionRecord:
        token = self.game.token(d.action)
        if obs.legal and token not in obs.legal and d.error is None:
            raise GameError(f"agent {agent} played {token!r} in {obs.game}; legal: {obs.legal}")
        return DecisionRecord(
            seat=obs.seat,
            round=obs.round,
            action=token,
            status=d.status,
            text=d.text,
            prompt=obs.prompt if d.text is not None else None,
            probs=dict(d.probs) if d.probs is not None else None,
            tokens=d.tokens,
            seconds=d.seconds,
            info=dict(d.info) if d.info else None,
            attempt=obs.attempt,
        )
