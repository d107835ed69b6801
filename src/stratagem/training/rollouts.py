"""Group rollouts for group-relative trainers (SEPO, bargaining GRPO; SPEC §6, §8).

A GRPO group is n episodes that share the episode seed — same cards, same values, the same draws
of a randomised opponent — and differ only in the policy's sampling. Decision seeds derive from
the episode seed, so n episodes played from one seed would sample the same text n times. The
``RolloutGame`` wrapper plays rollout r of a group by salting the trained seat's decision seeds
with r, and nothing else: an ``EpisodeSpec`` with ``seed`` = the group's seed and
``scenario`` = r plays it (an episode without a scenario is the plain game).

Naive equivalent: one agent object per rollout that salts its observations' seeds; ``play`` then
makes n batched generation calls per tick instead of one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from stratagem.agent import Agent
from stratagem.game import Game, Observation, Seat
from stratagem.seeding import derive
from stratagem.strategies import get_strategy


class RolloutState:
    """An episode state whose observations for ``seat`` carry seeds salted by ``rollout``."""

    def __init__(self, state: Any, rollout: int, seat: Seat):
        """Wrap ``state``; every other call goes to it unchanged."""
        self._state = state
        self.rollout = rollout
        self.seat = seat

    def observe(self, seat: Seat) -> Observation:
        """The wrapped state's observation, with the trained seat's seed salted."""
        obs = self._state.observe(seat)
        if seat != self.seat:
            return obs
        return dataclasses.replace(obs, seed=derive(obs.seed, "rollout", self.rollout))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


class RolloutGame:
    """``game``, where ``from_scenario(r, seed)`` plays rollout r of the group of ``seed``."""

    def __init__(self, game: Game, seat: Seat = 0):
        """Wrap ``game``; ``seat`` is the trained agent's seat."""
        self._game = game
        self.seat = seat

    def from_scenario(self, scenario: int, seed: int) -> RolloutState:
        """Rollout ``scenario`` of the group that plays episode seed ``seed``."""
        return RolloutState(self._game.new_episode(seed), int(scenario), self.seat)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._game, name)


def group_game(game: Game, seat: Seat = 0) -> Game:
    """``RolloutGame(game, seat)``, typed as the game it forwards every member to (``Game``'s
    class variables cannot be declared by a wrapper of any game)."""
    return cast(Game, RolloutGame(game, seat))


def opponent(game: str, name: str) -> Agent:
    """The strategy ``name`` of ``game``, as the agent of a seat (``Strategy.name`` is a
    read-only property, which the ``Agent`` protocol's plain attribute does not admit)."""
    return cast(Agent, get_strategy(game, name))
