"""SEPO rewards, penalties and per-round advantages (SPEC §6; seed 000 §3.2-3.3, Eq. 3-4, Alg. 1).

Pure functions on plain tensors. A *group* is the n rollouts of one step against one opponent:
they share the episode seed and differ only in the policy's sampling. Its rewards are a tensor
``(rollouts, rounds)``.

Advantages (``step_advantages``), for round t and rollout r of group g::

    A[g][r, t] = (R[g][r, t] − mean_r R[g][:, t]) / (σ + 1e-8)

where ``R`` is the reward-to-go from round t (``credit="return"``) or the round's own reward
(``credit="immediate"``). With ``scale="step"`` (SPEC) σ is one standard deviation pooled over the
centred returns of every group of the step, so a reward term multiplied by λ keeps a λ-times
larger share of the gradient. With ``scale="group"`` (the paper's Eq. 4, kept as an ablation) σ is
each group's own per-round std, which divides λ out again: a group whose rewards are all
``−λe·d`` gets the same advantages for every λe.

Naive equivalent of ``scale="group"`` for round t of one group: ``(R[:, t] - R[:, t].mean()) /
(R[:, t].std(unbiased=False) + 1e-8)``; the tests compare against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from stratagem.game import SafetyWeights

EPS = 1e-8
Credit = Literal["return", "immediate"]
Normalisation = Literal["round", "episode"]
Scale = Literal["step", "group"]
PenaltyMode = Literal["shared", "per_rollout", "own_episodes"]


def reward_to_go(rewards: torch.Tensor) -> torch.Tensor:
    """R[:, t] = Σ_{t' ≥ t} r[:, t']  — (rollouts, rounds) -> (rollouts, rounds)."""
    return rewards.flip(-1).cumsum(-1).flip(-1)


def round_returns(rewards: torch.Tensor, credit: Credit = "return") -> torch.Tensor:
    """The per-round quantity advantages centre: the reward-to-go or the immediate reward."""
    return reward_to_go(rewards) if credit == "return" else rewards


def centred_returns(
    rewards: torch.Tensor, *, credit: Credit = "return", normalisation: Normalisation = "round"
) -> torch.Tensor:
    """Returns minus the group baseline: (rollouts, rounds) for ``round``; (rollouts, 1) for
    ``episode`` (the episode total centred across rollouts, the ablation)."""
    if normalisation == "episode":
        total = rewards.sum(-1, keepdim=True)  # (n, 1)
        return total - total.mean(0, keepdim=True)
    returns = round_returns(rewards, credit)  # (n, T)
    return returns - returns.mean(0, keepdim=True)


def step_advantages(
    groups: Sequence[torch.Tensor],
    *,
    credit: Credit = "return",
    normalisation: Normalisation = "round",
    scale: Scale = "step",
) -> list[torch.Tensor]:
    """Advantages (rollouts, rounds) for every group of a step (see the module docstring).

    ``normalisation="episode"`` gives every round of a rollout its episode's advantage.
    A group of one rollout has advantage 0; a step whose rewards never differ, all zeros.
    """
    residuals = [
        centred_returns(g, credit=credit, normalisation=normalisation) for g in groups
    ]  # each (n, T) or (n, 1)
    if scale == "step":
        pooled = torch.cat([r.flatten() for r in residuals])
        sigma = pooled.pow(2).mean().sqrt() if len(pooled) else torch.tensor(0.0)
        scaled = [r / (sigma + EPS) for r in residuals]
    elif scale == "group":
        # population std across rollouts, per round (per episode with ``episode``)
        scaled = [r / (r.pow(2).mean(0, keepdim=True).sqrt() + EPS) for r in residuals]
    else:
        raise ValueError(f"unknown scale {scale!r}")
    return [a.expand(g.shape).clone() for a, g in zip(scaled, groups, strict=True)]


def shape_rewards(
    own: torch.Tensor,
    opponent: torch.Tensor,
    greedy: torch.Tensor,
    externality: torch.Tensor,
    pool: str,
    weights: SafetyWeights,
) -> torch.Tensor:
    """``own_episodes`` rewards per round (rollouts, rounds): each pool's episodes carry the term
    of J they measure, so the step's policy gradient is the gradient of J.

    exploit pool: −λe·(payoff_opponent − payoff_agent); collusive pool: −λc·[greedy act];
    train pool: payoff − λx·externality.
    """
    if pool == "exploit":
        return -weights.exploit * (opponent - own)
    if pool == "collusive":
        return -weights.collusion * greedy.to(own.dtype)
    if pool == "train":
        return own - weights.externality * externality
    raise ValueError(f"no SEPO reward for pool {pool!r}")


def penalty(
    exploit_advantages: Sequence[float],
    collusion: float,
    externality: float,
    weights: SafetyWeights,
) -> float:
    """P = λe·e + λc·c + λx·x (SPEC §3), e = mean over exploit opponents of max(0, their mean
    per-round advantage over the agent), c the collusive-act rate, x the mean externality."""
    e = sum(max(0.0, a) for a in exploit_advantages) / max(len(exploit_advantages), 1)
    return weights.exploit * e + weights.collusion * collusion + weights.externality * externality


def subtract_penalty(rewards: torch.Tensor, p: torch.Tensor | float) -> torch.Tensor:
    """``reward[r, t] = u[r, t] − P_r`` for every round (Eq. 3; Alg. 1 line 9).

    ``p`` is one number (``shared``: the same P for the whole group) or one per rollout
    (``per_rollout``), shape (rollouts,).
    """
    p = torch.as_tensor(p, dtype=rewards.dtype)
    if p.dim() == 0:
        return rewards - p
    if p.shape != rewards.shape[:1]:
        raise ValueError("a per-rollout penalty has one value per rollout")
    return rewards - p[:, None]


def group_weight(pool_size: int) -> float:
    """The weight of one opponent's group in the step's loss: J averages each term over its
    pool's opponents, so each of a pool's k opponents weighs 1/k."""
    if pool_size < 1:
        raise ValueError("a pool has at least one opponent")
    return 1.0 / pool_size
