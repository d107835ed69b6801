"""The one runner: every live episode advances one tick at a time, together.

Each tick collects the observations waiting in every live episode, groups them by *agent object*
(not by seat, so self-play is one batch) and calls each agent's ``act`` once. An LLM agent turns
that batch into one batched model call. Tournaments, evaluations and trainers all use ``play``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from stratagem.agent import Agent, Decision
from stratagem.errors import GameError, StratagemError
from stratagem.game import Game, Observation, RoundResult, Seat, State
from stratagem.trace import DecisionRecord, Trace


@dataclass(frozen=True)
class EpisodeSpec:
    """What to play: an id (unique within a run), a seed, and the agent in each seat."""

    episode_id: str
    seed: int
    agents: tuple[Agent, Agent]
    meta: Mapping[str, Any] = field(default_factory=dict)
    scenario: Any = None  # a game scenario to play instead of one drawn from the seed


@dataclass
class _Live:
    spec: EpisodeSpec
    state: State
    rounds: list[RoundResult] = field(default_factory=list)
    decisions: list[DecisionRecord] = field(default_factory=list)
    pending: dict[Seat, Any] = field(default_factory=dict)
    error: str | None = None


def play(
    game: Game,
    episodes: Iterable[EpisodeSpec],
    *,
    max_live: int = 256,
    skip: Iterable[str] = (),
    on_error: Literal["raise", "record"] = "raise",
    on_finish: Callable[[Trace], None] | None = None,
) -> Iterator[Trace]:
    """Play ``episodes`` with at most ``max_live`` in flight; yield each trace as it finishes.

    Episodes whose id is in ``skip`` are not played (resume). A decision that carries an
    ``error`` (the backend gave up on it) ends its episode as an ``error``/``timeout`` trace. With
    ``on_error="record"`` an agent that raises ends the episodes of its batch the same way, except
    for ``StratagemError``s, which always stop the run.
    """
    skip = set(skip)
    pending = (spec for spec in episodes if spec.episode_id not in skip)
    live: list[_Live] = []
    exhausted = False
    while True:
        while not exhausted and len(live) < max_live:
            spec = next(pending, None)
            if spec is None:
                exhausted = True
            else:
                state = (
                    game.new_episode(spec.seed)
                    if spec.scenario is None
                    else game.from_scenario(spec.scenario, spec.seed)
                )
                live.append(_Live(spec, state))
        if not live:
            return
        _tick(game, live, on_error)
        still: list[_Live] = []
        for ep in live:
            if ep.error is None and ep.state.to_act():
                still.append(ep)
                continue
            trace = _finish(game, ep)
            if on_finish is not None:
                on_finish(trace)
            yield trace
        live = still


def _tick(game: Game, live: list[_Live], on_error: str) -> None:
    groups: dict[int, tuple[Agent, list[tuple[_Live, Observation]]]] = {}
    for ep in live:
        for seat in ep.state.to_act():
            agent = ep.spec.agents[seat]
            groups.setdefault(id(agent), (agent, []))[1].append((ep, ep.state.observe(seat)))
    for agent, items in groups.values():
        _dispatch(game, agent, items, on_error)
    for ep in live:
        if ep.error is None and ep.pending and len(ep.pending) == len(ep.state.to_act()):
            result = ep.state.apply(ep.pending)
            ep.pending = {}
            if result is not None:
                ep.rounds.append(result)


def _dispatch(
    game: Game, agent: Agent, items: list[tuple[_Live, Observation]], on_error: str
) -> None:
    """One batched ``act`` call for every observation waiting for ``agent``."""
    batch = [obs for _, obs in items]
    try:
        decisions = agent.act(batch)
        if len(decisions) != len(batch):
            raise GameError(
                f"agent {agent.name} returned {len(decisions)} decisions "
                f"for {len(batch)} observations"
            )
    except Exception as exc:
        if on_error == "raise" or isinstance(exc, StratagemError):
            raise  # our own errors (a bad key, a broken rule) stop the run
        for ep, _ in items:
            ep.error = f"{type(exc).__name__}: {exc}"
        return
    for (ep, obs), decision in zip(items, decisions, strict=True):
        ep.decisions.append(_record(game, agent, obs, decision))
        if decision.error is not None:
            ep.error = decision.error
        else:
            ep.pending[obs.seat] = decision.action


def _record(game: Game, agent: Agent, obs: Observation, d: Decision) -> DecisionRecord:
    token = game.token(d.action)
    if obs.legal and token not in obs.legal:
        raise GameError(f"agent {agent.name} played {token!r} in {obs.game}; legal: {obs.legal}")
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
    )


def _finish(game: Game, ep: _Live) -> Trace:
    spec = ep.spec
    return Trace(
        episode_id=spec.episode_id,
        game=game.name,
        version=game.version,
        seed=spec.seed,
        agents=(spec.agents[0].name, spec.agents[1].name),
        rounds=tuple(ep.rounds),
        decisions=tuple(ep.decisions),
        scenario=ep.state.scenario(),
        meta=dict(spec.meta),
        status=("timeout" if ep.error.startswith("timeout") else "error")
        if ep.error
        else "complete",
        error=ep.error,
    )


def play_one(game: Game, agents: Sequence[Agent], seed: int, episode_id: str = "0") -> Trace:
    """Play a single episode (a convenience for notebooks and tests)."""
    spec = EpisodeSpec(episode_id, seed, (agents[0], agents[1]))
    return next(play(game, [spec]))
