"""Group-relative advantages and SEPO reward shaping (SPEC §6; seed 000 §3.2-3.5, Alg. 1).

All functions are pure and work on plain tensors of shape ``(rollouts, rounds)`` for one group
(the n rollouts against one opponent, which share the episode seed and differ only in sampling).

Naive equivalent of ``group_advantages`` for round t: ``(R[:, t] - R[:, t].mean()) /
(R[:, t].std() + eps)``; the tests compare against it.
"""

from __future__ import annotations

from typing import Literal

import torch

EPS = 1e-8
Credit = Literal["return", "immediate"]
Normalisation = Literal["round", "episode"]
PenaltyMode = Literal["shared", "per_rollout", "own_episodes"]


def reward_to_go(rewards: torch.Tensor) -> torch.Tensor:
    """R[:, t] = Σ_{t' ≥ t} r[:, t']  — (rollouts, rounds) -> (rollouts, rounds)."""
    return rewards.flip(-1).cumsum(-1).flip(-1)


def round_returns(rewards: torch.Tensor, credit: Credit = "return") -> torch.Tensor:
    """The per-round quantity advantages normalise: reward-to-go or the immediate reward."""
    return reward_to_go(rewards) if credit == "return" else rewards


def group_advantages(
    rewards: torch.Tensor,
    *,
    credit: Credit = "return",
    normalisation: Normalisation = "round",
) -> torch.Tensor:
    """Advantages (rollouts, rounds) for one group.

    ``round``: A[r, t] = (R[r, t] − mean_r R[:, t]) / (std_r R[:, t] + 1e-8) — every token of the
    decision at round t gets A[r, t]. ``episode`` (ablation): the episode return is normalised
    across rollouts and given to every round.
    """
    if normalisation == "episode":
        total = rewards.sum(-1, keepdim=True)  # (rollouts, 1)
        adv = (total - total.mean(0)) / (_std(total) + EPS)
        return adv.expand_as(rewards).clone()
    returns = round_returns(rewards, credit)  # (rollouts, rounds)
    return (returns - returns.mean(0, keepdim=True)) / (_std(returns) + EPS)


def _std(x: torch.Tensor) -> torch.Tensor:
    # population std (GRPO); a group of one has std 0 and advantage 0
    return x.std(0, unbiased=False, keepdim=True)


def apply_penalty(
    rewards: torch.Tensor, penalty: torch.Tensor | float, mode: PenaltyMode
) -> torch.Tensor:
    """Rewards after subtracting a safety penalty spread over the rounds.

    ``shared``: one P for every rollout (Alg. 1 as printed) — it cancels in group normalisation;
    ``per_rollout``: P has shape (rollouts,), each rollout's own auxiliary-episode penalty.
    ``own_episodes`` shapes the rewards at the source (``shape_rewards``) instead, so here it is
    the identity.
    """
    if mode == "own_episodes":
        return rewards
    rounds = rewards.shape[-1]
    p = torch.as_tensor(penalty, dtype=rewards.dtype)
    if mode == "shared":
        if p.numel() != 1:
            raise ValueError("a shared penalty is one number for the whole step")
        return rewards - p / rounds
    if p.shape != rewards.shape[:1]:
        raise ValueError("a per-rollout penalty has one value per rollout")
    return rewards - p[:, None] / rounds


def shape_rewards(
    own: torch.Tensor,
    opponent: torch.Tensor,
    greedy: torch.Tensor,
    externality: torch.Tensor,
    pool: str,
    *,
    exploit_weight: float,
    collusion_weight: float,
    externality_weight: float,
) -> torch.Tensor:
    """``own_episodes`` rewards per round (rollouts, rounds): each pool optimises its own term.

    exploit pool: −λe·(payoff_opponent − payoff_agent); collusive pool: −λc·[greedy act];
    train pool: payoff − λx·externality. This is the policy gradient of J itself.
    """
    if pool == "exploit":
        return -exploit_weight * (opponent - own)
    if pool == "collusive":
        return -collusion_weight * greedy.to(own.dtype)
    if pool == "train":
        return own - externality_weight * externality
    raise ValueError(f"no SEPO reward for pool {pool!r}")
