"""Matches as plain data: what a tournament or evaluation sends to a worker on another process
or machine (SPEC §10).

An ``EpisodeSpec`` holds agent *objects*, which cannot travel; a ``MatchSpec`` names each agent
by its spec string (``strategy:TitForTat``, ``hf``, ``openai:MODEL``) and carries the scenario
as a dict, so a worker rebuilds the same episode. ``RemoteAgent`` lets a driver schedule a model
agent without loading it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stratagem.agent import Agent, Decision, Strategy
from stratagem.episode import EpisodeSpec
from stratagem.errors import ConfigError, StratagemError
from stratagem.game import Game, Observation

__all__ = ["MatchSpec", "RemoteAgent", "agent_spec", "match_spec"]


@dataclass(frozen=True)
class MatchSpec:
    """One episode as plain data, for a worker on another process or machine.

    ``agents`` are agent spec strings (``strategy:TitForTat``, ``hf``, ``openai:MODEL``) by seat;
    ``scenario`` is the game scenario's dict form (``None``: drawn from the seed).
    """

    episode_id: str
    seed: int
    agents: tuple[str, str]
    meta: Mapping[str, Any] = field(default_factory=dict)
    scenario: Mapping[str, Any] | None = None

    def episode(self, agents: tuple[Agent, Agent]) -> EpisodeSpec:
        """Returns the ``EpisodeSpec`` this match describes, with the worker's agent objects."""
        return EpisodeSpec(self.episode_id, self.seed, agents, dict(self.meta), self.scenario)


@dataclass(frozen=True)
class RemoteAgent:
    """An agent the driver only names: Ray workers build it from ``spec``.

    Lets a tournament driver schedule model agents without loading their weights; calling
    ``act`` here is an error (only workers play).
    """

    spec: str
    name: str

    def act(self, batch: Sequence[Observation]) -> list[Decision]:
        """Raises ``StratagemError``: a remote agent plays on Ray workers only."""
        raise StratagemError(f"agent {self.name} ({self.spec}) plays on Ray workers only")


def agent_spec(agent: Agent, game: Game, specs: Mapping[str, str]) -> str:
    """Returns the spec string that rebuilds ``agent`` on a worker.

    A ``RemoteAgent`` carries its own; otherwise ``specs`` maps agent names to spec strings, and
    a game's strategy with its default parameters is ``strategy:NAME``. Raises ``ConfigError``
    for an agent that cannot be rebuilt from a string.
    """
    if isinstance(agent, RemoteAgent):
        return agent.spec
    if agent.name in specs:
        return specs[agent.name]
    if isinstance(agent, Strategy) and _is_default(agent, game):
        return f"strategy:{agent.name}"
    raise ConfigError(
        f"agent {agent.name!r} cannot be rebuilt on a Ray worker: give its spec string "
        f"(e.g. RayPlayer(agents={{{agent.name!r}: 'hf'}}))"
    )


def _is_default(agent: Strategy, game: Game) -> bool:
    """Whether ``agent`` is its strategy with default parameters (what ``strategy:NAME`` builds)."""
    from stratagem.strategies import get_strategy

    try:
        default = get_strategy(game.name, agent.name)
    except StratagemError:
        return False
    if type(default) is not type(agent):
        return False
    if dataclasses.is_dataclass(agent):
        return all(
            getattr(agent, f.name) == getattr(default, f.name) for f in dataclasses.fields(agent)
        )
    return vars(agent) == vars(default)


def match_spec(spec: EpisodeSpec, game: Game, specs: Mapping[str, str]) -> MatchSpec:
    """Returns ``spec`` as plain data (see ``agent_spec`` for how agents become strings)."""
    scenario = spec.scenario
    if scenario is not None and not isinstance(scenario, Mapping):
        to_dict = getattr(scenario, "to_dict", None)
        if to_dict is not None:
            scenario = to_dict()
        elif dataclasses.is_dataclass(scenario):
            scenario = dataclasses.asdict(scenario)  # type: ignore[arg-type]
        else:
            raise ConfigError(f"{game.name}: a scenario must be a dict or have to_dict()")
    return MatchSpec(
        spec.episode_id,
        spec.seed,
        (agent_spec(spec.agents[0], game, specs), agent_spec(spec.agents[1], game, specs)),
        dict(spec.meta),
        scenario,
    )
