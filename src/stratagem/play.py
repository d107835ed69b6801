"""The one scheduler: every live ``Episode`` advances one tick at a time, together.

Each tick collects the observations waiting in every live episode, groups them by *agent object*
(not by seat, so self-play is one batch) and calls each agent's ``act`` once. An LLM agent turns
that batch into one batched model call. Tournaments, evaluations and trainers all use ``play``;
the play page and tree expansion drive single ``Episode`` objects with the same calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal

from stratagem.agent import Agent
from stratagem.episode import Episode, EpisodeSpec
from stratagem.errors import GameError, StratagemError
from stratagem.game import Game, Observation
from stratagem.trace import Trace

__all__ = ["EpisodeSpec", "play", "play_one"]

_Live = tuple[Episode, tuple[Agent, Agent]]


def play(
    game: Game,
    episodes: Iterable[EpisodeSpec],
    *,
    max_live: int = 256,
    skip: Iterable[str] = (),
    on_error: Literal["raise", "record"] = "raise",
    on_finish: Callable[[Trace], None] | None = None,
    on_episode: Callable[[Episode], None] | None = None,
) -> Iterator[Trace]:
    """Play ``episodes`` with at most ``max_live`` in flight; yield each trace as it finishes.

    Episodes whose id is in ``skip`` are not played (resume). A decision that carries an
    ``error`` (the backend gave up on it) ends its episode as an ``error``/``timeout`` trace. With
    ``on_error="record"`` an agent that raises ends the episodes of its batch the same way, except
    for ``StratagemError``s, which always stop the run; a ``GameError`` raised by one episode's
    own state (a scenario its engine cannot play) ends that episode alone as an ``error`` trace
    with the reason. ``on_episode`` sees each finished ``Episode`` (its chats) before its trace
    is yielded.
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
                live.append((Episode.from_spec(game, spec), spec.agents))
        if not live:
            return
        _tick(live, on_error)
        still: list[_Live] = []
        for item in live:
            episode = item[0]
            if not episode.done:
                still.append(item)
                continue
            if on_episode is not None:
                on_episode(episode)
            trace = episode.trace()
            if on_finish is not None:
                on_finish(trace)
            yield trace
        live = still


def _tick(live: list[_Live], on_error: str) -> None:
    groups: dict[int, tuple[Agent, list[tuple[Episode, Observation]]]] = {}
    for episode, agents in live:
        for obs in episode.waiting():
            agent = agents[obs.seat]
            groups.setdefault(id(agent), (agent, []))[1].append((episode, obs))
    for agent, items in groups.values():
        _dispatch(agent, items, on_error)
    for episode, _ in live:
        if episode.ready:
            try:
                episode.step()
            except GameError as exc:
                if on_error == "raise":
                    raise
                episode.fail(f"GameError: {exc}")  # one broken episode, not a broken run


def _dispatch(agent: Agent, items: list[tuple[Episode, Observation]], on_error: str) -> None:
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
        for episode, _ in items:
            episode.fail(f"{type(exc).__name__}: {exc}")
        return
    for (episode, obs), decision in zip(items, decisions, strict=True):
        if not episode.done:  # another seat's failed decision may have ended it this tick
            episode.submit(obs.seat, decision, agent.name)


def play_one(game: Game, agents: Sequence[Agent], seed: int, episode_id: str = "0") -> Trace:
    """Play a single episode (a convenience for notebooks and tests)."""
    spec = EpisodeSpec(episode_id, seed, (agents[0], agents[1]))
    return next(play(game, [spec]))
