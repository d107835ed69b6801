"""Policy-gradient losses shared by the trainers: the PPO clipped surrogate and the one-sided KL
penalty (seed 000 §3.3, Eq. 5-6; SPEC §6).

All functions work per token on tensors of one shape, e.g. ``(N,)`` for the N trained tokens of
a micro-batch: ``new`` are the current policy's log-probabilities (with gradient), ``old`` the
behaviour policy's, recorded when the rollout sampled the tokens, and ``ref`` the reference
policy's (the same model with its adapter disabled).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def clipped_surrogate(
    new: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor, clip: float
) -> torch.Tensor:
    """Per-token PPO loss ``−min(ρ·A, clip(ρ, 1−ε, 1+ε)·A)`` with ``ρ = exp(new − old)``.

    At ``new == old`` (the first epoch on fresh rollouts) ρ = 1 and the gradient is the plain
    policy gradient ``−A·∇log π``. Once ρ leaves ``[1−ε, 1+ε]`` in the direction the advantage
    pushes, the clipped branch is the minimum and the token's gradient is zero.
    """
    ratio = torch.exp(new - old)
    return -torch.minimum(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)


def one_sided_kl(new: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per-token ``max(0, log π − log π_ref)`` (Eq. 6): only moves above the reference cost."""
    return torch.relu(new - ref)


def clipped(
    new: torch.Tensor, old: torch.Tensor, advantages: torch.Tensor, clip: float
) -> torch.Tensor:
    """Which tokens the clip holds (their surrogate has zero gradient): bool, same shape."""
    ratio = torch.exp(new - old)
    return ((ratio > 1 + clip) & (advantages > 0)) | ((ratio < 1 - clip) & (advantages < 0))


@dataclass(frozen=True)
class LossParts:
    """A policy loss and what the trainer logs of it (numbers, detached)."""

    loss: torch.Tensor  # scalar, with gradient
    surrogate: float  # Σ weight · surrogate
    kl: float  # Σ weight · one-sided KL
    clipped: int  # tokens held by the clip
    ratio_max_dev: float  # max |ρ − 1| over the tokens
    tokens: int


def policy_loss(
    new: torch.Tensor,
    old: torch.Tensor,
    ref: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    *,
    clip: float,
    beta: float,
) -> LossParts:
    """``Σ_tokens weight · (surrogate + β·KL)``: the SEPO loss of a micro-batch (Alg. 1 l. 13-15).

    ``weights`` carry every normalisation (a decision's tokens share its weight / its length, the
    group weight, 1 / (rollouts · rounds)), so summing micro-batch losses gives the step's loss.
    """
    surrogate = clipped_surrogate(new, old, advantages, clip)
    kl = one_sided_kl(new, ref)
    loss = (weights * (surrogate + beta * kl)).sum()
    with torch.no_grad():
        dev = (torch.exp(new - old) - 1).abs()
        return LossParts(
            loss=loss,
            surrogate=float((weights * surrogate).sum()),
            kl=float((weights * kl).sum()),
            clipped=int(clipped(new, old, advantages, clip).sum()),
            ratio_max_dev=float(dev.max()) if dev.numel() else 0.0,
            tokens=int(new.numel()),
        )
