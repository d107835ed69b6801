"""An exploiter that knows the policy it plays: the exact best response to the trained policy
(SEPO's ``--exploit-best-response``; Kuhn, the game with an exact best response today).

SEPO's exploit pool is a few fixed strategies, and the safety term can push only against what
they exploit: once the policy beats them, their penalty is spent while a best responder still
gains (docs/results/kuhn.md). In Kuhn the best response to a policy is exact and cheap, so
before each step's rollouts the trained policy's action distribution at the 12 information sets
is read as the exact-exploitability metric reads it (``metrics.kuhn.policy_of``: the answer-at-
once distribution over legal actions, on the first hand's prompts) and the pure best response
to that policy, in both positions, joins the exploit pool as ``BestResponse``. It answers that
reading of the policy, a stand-in for what the rollouts sample (at their temperature, with
free text, and with earlier hands in view in hands 2-6). Its episodes are rewarded like every
exploit group's (``−λe · (payoff_o − payoff_agent)``, only under ``--penalty own_episodes``,
where exploit episodes carry a gradient); the extra group also joins the step's pooled standard
deviation and takes a third of the exploit pool's weight, so a comparison should run both of
its arms (λ = 1 and the λ = 0 control) with the same pools. Checkpoint evaluation keeps the
game's own pools: J stays comparable with runs without it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from stratagem.agent import Agent, Strategy
from stratagem.games.kuhn import KuhnView, infoset_key
from stratagem.metrics.kuhn import policy_of
from stratagem.pools import Pools
from stratagem.solvers.best_response import best_response_policy, exploitability
from stratagem.training.sepo.args import BEST_RESPONSE_GAMES

BEST_RESPONSE = "BestResponse"
GAMES = BEST_RESPONSE_GAMES


@dataclass
class BestResponse(Strategy):
    """Plays ``policy`` (information set -> {action: probability}, both positions): here the pure
    best response to another policy."""

    policy: dict[str, dict[str, float]]
    game: ClassVar[str] = "kuhn"

    def probabilities(self, view: KuhnView) -> dict[Any, float]:
        """The policy's distribution at the information set of ``view`` (own card and the
        betting so far in this hand)."""
        chosen = self.policy[infoset_key(view.card, view.history)]
        return {act: chosen.get(str(act), 0.0) for act in view.legal}


def best_response_to(agent: Agent, game: Any) -> tuple[BestResponse, float]:
    """The exact best response to ``agent``'s policy in both positions, and what it gains beyond
    the game value (the policy's exact exploitability)."""
    policy = policy_of(agent, game)
    root = game.game_tree()
    response = {**best_response_policy(root, 0, policy), **best_response_policy(root, 1, policy)}
    return BestResponse(response), exploitability(root, policy)


def with_best_response(pools: Pools) -> Pools:
    """``pools`` with ``BestResponse`` added to the exploit pool."""
    return dataclasses.replace(pools, exploit=(*pools.exploit, BEST_RESPONSE))
