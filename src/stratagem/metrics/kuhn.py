"""Exact exploitability of any agent that reports action probabilities (SPEC §2.5).

Works for every game that declares a solver tree (``HasSolverTree``; Kuhn and Leduc). The agent
is asked once, in one batch, for its action distribution at each information set, with the chat
the seat sees there in play; a best responder then plays against that policy on the exact tree.

A match has several hands and later hands see longer chats, so "the policy" is a policy per hand.
``policy_of`` reads the first hand's; ``exploitability_by_hand`` (Kuhn) reads each later hand as
its own policy, its earlier hands those of one seeded match the agent plays against a reference
opponent, and reports every hand's exploitability (the worst is the figure to quote).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from stratagem.agent import Agent, ReportsActionProbs
from stratagem.episode import Episode
from stratagem.errors import StratagemError
from stratagem.game import HasSolverTree, Observation
from stratagem.solvers.best_response import exploitability, nash_conv

Policy = dict[str, dict[str, float]]


def _kuhn() -> HasSolverTree:
    from stratagem.games.kuhn import Kuhn

    return Kuhn()


def policy_of(
    agent: Agent,
    game: HasSolverTree | None = None,
    observations: Mapping[str, Observation] | None = None,
) -> Policy:
    """Returns infoset -> {action token: probability}, as the agent reports it at
    ``observations`` (default: the game's first-hand information sets; Kuhn by default).
    Raises ``StratagemError`` when the agent reports no probabilities."""
    if observations is None:
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
    both seats, against the agent's first-hand policy (Kuhn by default)."""
    game = game or _kuhn()
    return exploitability(game.game_tree(), policy_of(agent, game))


def exact_nash_conv(agent: Agent, game: HasSolverTree | None = None) -> float:
    """Returns the NashConv of the agent's first-hand policy played in both positions."""
    game = game or _kuhn()
    return nash_conv(game.game_tree(), policy_of(agent, game))


@dataclass(frozen=True)
class HandExploitability:
    """The exact exploitability of each hand's policy of one seeded Kuhn match."""

    by_hand: tuple[float, ...]  # hand 1 first
    policies: tuple[Policy, ...]
    seed: int
    opponent: str

    @property
    def worst(self) -> float:
        """The largest exploitability over the hands."""
        return max(self.by_hand)

    @property
    def worst_hand(self) -> int:
        """The 1-based hand whose policy is the most exploitable."""
        return self.by_hand.index(self.worst) + 1


def exploitability_by_hand(
    agent: Agent, opponent: Agent, *, seed: int = 0, prompt_style: str = "chat"
) -> HandExploitability:
    """Returns the exact exploitability of the agent's policy in each hand of a Kuhn match.

    Hand 1 is ``policy_of``'s. For a later hand the agent plays the earlier hands of a match
    seeded ``seed`` against ``opponent`` (as it plays: same sampling, same seeds), once in each
    seat; the hand's 12 information sets are then probed with that conversation behind them (the
    seat holding each position in that hand). All probes go to the agent in one batch.
    """
    from stratagem.games.kuhn import HANDS, Kuhn, MatchPrefix

    game = Kuhn(prompt_style=prompt_style)
    prefixes = _match_prefixes(game, agent, opponent, seed)
    keyed: list[tuple[int, str, Observation]] = [
        (0, k, o) for k, o in game.infoset_observations().items()
    ]
    for hand in range(1, HANDS):
        for seat in (0, 1):
            prefix: MatchPrefix = prefixes[seat][hand]
            keyed += [(hand, k, o) for k, o in game.infoset_observations(prefix).items()]
    flat = policy_of(agent, game, {f"{h}|{k}": o for h, k, o in keyed})
    policies: list[Policy] = [{} for _ in range(HANDS)]
    for hand, key, _ in keyed:
        policies[hand][key] = flat[f"{hand}|{key}"]
    root = game.game_tree()
    return HandExploitability(
        by_hand=tuple(exploitability(root, p) for p in policies),
        policies=tuple(policies),
        seed=seed,
        opponent=opponent.name,
    )


def _match_prefixes(game: Any, agent: Agent, opponent: Agent, seed: int) -> list[list[Any]]:
    """Plays one match per seat of the agent (both in lockstep, batched); returns, per seat, the
    ``MatchPrefix`` at the start of every hand."""
    from stratagem.games.kuhn import KuhnState, MatchPrefix

    seated = ((agent.name, opponent.name), (opponent.name, agent.name))
    episodes = [Episode(game, f"probe-seat{s}", seed, seated[s]) for s in (0, 1)]
    prefixes: list[list[MatchPrefix]] = [[], []]
    while not all(e.done for e in episodes):
        for seat, episode in enumerate(episodes):
            state = cast(KuhnState, episode.state)
            if not episode.done and len(prefixes[seat]) == state.hand:
                prefixes[seat].append(
                    MatchPrefix(
                        seat, state.cards[: state.hand], tuple(state.past), episode.chat(seat)
                    )
                )
        waiting = [(s, e, o) for s, e in enumerate(episodes) if not e.done for o in e.waiting()]
        for who, mine in ((agent, True), (opponent, False)):
            group = [(e, o) for s, e, o in waiting if (o.seat == s) == mine]
            if group:
                decisions = who.act([o for _, o in group])
                for (episode, obs), decision in zip(group, decisions, strict=True):
                    episode.submit(obs.seat, decision)
        for episode in episodes:
            if not episode.done and not episode.waiting():
                episode.step()
            if episode.error is not None:
                raise StratagemError(f"the probe's match could not be played: {episode.error}")
    return prefixes
