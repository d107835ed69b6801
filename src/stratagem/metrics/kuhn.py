"""Exact exploitability of any agent that reports action probabilities (SPEC §2.5).

Works for every game that declares a solver tree (``HasSolverTree``; Kuhn today). The agent is
asked once, in one batch, for its action distribution at each information set; a best responder
then plays against that policy on the exact game tree.
"""

from __future__ import annotations

from collections.abc import Mapping

from stratagem.agent import Agent, ReportsActionProbs
from stratagem.errors import StratagemError
from stratagem.game import HasSolverTree
from stratagem.solvers.best_response import exploitability, nash_conv


def _kuhn() -> HasSolverTree:
    from stratagem.games.kuhn import Kuhn

    return Kuhn()


def policy_of(agent: Agent, game: HasSolverTree | None = None) -> dict[str, dict[str, float]]:
    """Returns infoset -> {action token: probability}, as the agent reports it (Kuhn by
    default). Raises ``StratagemError`` when the agent reports no probabilities."""
    observations = (game or _kuhn()).infoset_observations()
    batch = list(observations.values())
    reported: list[Mapping[str, float] | None]
    if isinstance(agent, ReportsActionProbs):  # an LLM agent: its constrained distribution
        reported = list(agent.action_probs(batch))
    else:
        reported = [d.probs for d in agent.act(batch)]
    policy = {}
    for key, probs in zip(observations, reported, strict=True):
        if probs is None:
            raise StratagemError(
                f"agent {agent.name} does not report action probabilities, so its exact "
                "exploitability cannot be computed"
            )
        total = sum(probs.values())
        policy[key] = {a: p / total for a, p in probs.items()}
    return policy


def exact_exploitability(agent: Agent, game: HasSolverTree | None = None) -> float:
    """Returns the chips per hand a best responder wins beyond the game value, averaged over
    both seats (Kuhn by default)."""
    game = game or _kuhn()
    return exploitability(game.game_tree(), policy_of(agent, game))


def exact_nash_conv(agent: Agent, game: HasSolverTree | None = None) -> float:
    """Returns the NashConv of the agent's policy played in both positions."""
    game = game or _kuhn()
    return nash_conv(game.game_tree(), policy_of(agent, game))
