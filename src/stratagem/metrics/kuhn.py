"""Exact Kuhn exploitability of any agent that reports action probabilities (SPEC §2.5).

The agent is asked once, in one batch, for its action distribution at each of Kuhn's 12
information sets; a best responder then plays against that policy on the exact game tree.
"""

from __future__ import annotations

from stratagem.agent import Agent
from stratagem.errors import StratagemError
from stratagem.games.kuhn import game_tree, infoset_observations
from stratagem.solvers.best_response import exploitability, nash_conv


def policy_of(agent: Agent) -> dict[str, dict[str, float]]:
    """Infoset -> {action token: probability}, as the agent reports it."""
    observations = infoset_observations()
    batch = list(observations.values())
    if hasattr(agent, "action_probs"):  # an LLM agent: its constrained action distribution
        reported = agent.action_probs(batch)
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


def exact_exploitability(agent: Agent) -> float:
    """Chips per hand a best responder wins beyond the game value, averaged over both seats."""
    return exploitability(game_tree(), policy_of(agent))


def exact_nash_conv(agent: Agent) -> float:
    return nash_conv(game_tree(), policy_of(agent))
