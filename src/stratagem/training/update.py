"""The PPO/GRPO update step shared by the policy-gradient trainers (SEPO, bargaining GRPO).

Loss per trained token: the PPO clipped surrogate (ε ``clip``) on the ratio to the rollout-time
log-probabilities, plus β (``kl``) · one-sided KL against the same model with its LoRA adapter
disabled, both at the sampling temperature (``losses.policy_loss``). ``epochs`` optimiser steps
per batch of rollouts, each one backward per sequence (accumulated), with gradient clipping.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from stratagem.training.args import GRPOArgs, SamplingArgs, UpdateArgs
from stratagem.training.logprobs import sequence_logprobs
from stratagem.training.losses import policy_loss
from stratagem.training.packing import TrainSequence

LogProbs = Callable[..., torch.Tensor]  # (model, ids, positions, *, temperature) -> (positions,)


def beta(args: UpdateArgs) -> float:
    """The KL coefficient; a trainer resolves its default before training.

    Raises:
        ValueError: ``kl`` is still None.
    """
    if args.kl is None:
        raise ValueError("kl is unset: resolve the trainer's default before the update")
    return args.kl


def _tensor(values: list[float], device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device)


def reference_logprobs(
    policy: Any,
    sequences: list[TrainSequence],
    args: SamplingArgs,
    *,
    logprobs: LogProbs = sequence_logprobs,
) -> list[torch.Tensor]:
    """The reference policy's log-probs (adapter disabled) of every trained token, per sequence."""
    with torch.no_grad(), policy.disable_adapter():
        return [
            logprobs(policy, s.ids, s.positions, temperature=args.temperature) for s in sequences
        ]


def accumulate_gradients(
    policy: Any,
    sequences: list[TrainSequence],
    refs: list[torch.Tensor],
    args: GRPOArgs,
    *,
    logprobs: LogProbs = sequence_logprobs,
) -> dict[str, float]:
    """Backward of the step's loss, one sequence at a time (their sum is the step's loss).

    ``logprobs`` reads a sequence's token log-probs (``logprobs.full_logits_sequence_logprobs``
    is the naive form the benchmark compares)."""
    # the counts (clipped, tokens) stay ints in the logged JSON
    stats: dict[str, float] = {
        "loss": 0.0,
        "kl": 0.0,
        "clipped": 0,
        "ratio_max_dev": 0.0,
        "tokens": 0,
    }
    for s, ref in zip(sequences, refs, strict=True):
        new = logprobs(policy, s.ids, s.positions, temperature=args.temperature)
        device = new.device
        parts = policy_loss(
            new,
            _tensor(s.old, device),
            ref,
            _tensor(s.advantages, device),
            _tensor(s.weights, device),
            clip=args.clip,
            beta=beta(args),
        )
        parts.loss.backward()
        stats["loss"] += float(parts.loss.detach())
        stats["kl"] += parts.kl
        stats["clipped"] += parts.clipped
        stats["ratio_max_dev"] = max(stats["ratio_max_dev"], parts.ratio_max_dev)
        stats["tokens"] += parts.tokens
    return stats


def update(
    policy: Any,
    optimizer: torch.optim.Optimizer,
    params: list[torch.nn.Parameter],
    sequences: list[TrainSequence],
    args: GRPOArgs,
    *,
    logprobs: LogProbs | None = None,
) -> list[dict[str, float]]:
    """``epochs`` optimiser steps on one batch of rollouts; returns each epoch's stats."""
    if logprobs is None:
        logprobs = functools.partial(sequence_logprobs, chunk=args.chunk)
    policy.eval()  # the reference has no adapter, hence no dropout either way
    refs = reference_logprobs(policy, sequences, args, logprobs=logprobs)
    policy.train()
    out = []
    for _ in range(args.epochs):
        optimizer.zero_grad(set_to_none=True)
        stats = accumulate_gradients(policy, sequences, refs, args, logprobs=logprobs)
        stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, args.grad_clip))
        optimizer.step()
        out.append(stats)
    policy.eval()
    return out
