"""The PPO/GRPO update step shared by the policy-gradient trainers (SEPO, bargaining GRPO).

Loss per trained token: the PPO clipped surrogate (ε ``clip``) on the ratio to the old policy,
plus β (``kl``) · one-sided KL against the reference (``Reference``: the same model with its LoRA
adapter disabled, or the policy as it was at its last refresh), both at the sampling temperature
(``losses.policy_loss``). ``epochs`` optimiser steps per batch of rollouts, each one backward per
sequence (accumulated), with gradient clipping.

The old log-probs of the ratio are the first epoch's own, detached, not the rollout-time ones:
the sampler's numbers come from another forward (batched, KV-cached, bf16 on a GPU, vLLM
possibly, dropout off) and differ from the trainer's by up to 0.47 nats on a bf16 policy, which
made the first epoch's ratio up to 1.37 instead of 1. Recomputing them in a separate no-grad pass
in train mode would not fix it either: LoRA dropout draws another mask on every forward. Taking
``old = new.detach()`` in the same forward as the first epoch's gradient makes ρ = 1 exactly in
any dtype and dropout state (what TRL's GRPO does with one iteration per batch); later epochs
compare against those numbers. The rollout-time log-probs are only measured against them
(``rollout_logprob_max_dev``). This treats the samples as on-policy: a sampler that departs from
the trained policy (vLLM in bf16) is not reweighted (no truncated importance sampling).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from stratagem.training.args import GRPOArgs, SamplingArgs, UpdateArgs
from stratagem.training.logprobs import sequence_logprobs
from stratagem.training.losses import LossParts, policy_loss
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


class Reference:
    """The KL reference: the starting policy (the model with its LoRA adapter disabled) until
    the first ``refresh``, then the policy as it was at its last refresh (a copy of its
    trainable weights, swapped in for the reference's forward and back out bit for bit).

    Seed 000 Table 17 refreshes it every 5 steps or when the KL exceeds 0.5
    (``--ref-refresh-every 5 --ref-refresh-kl 0.5``); by default it is never refreshed.
    """

    def __init__(self, snapshot: dict[str, torch.Tensor] | None = None):
        """Start from ``snapshot`` (a resumed run's), or from the starting policy (None)."""
        self.snapshot = snapshot

    def due(self, step: int, kl: float, args: UpdateArgs) -> bool:
        """Whether to refresh after step ``step`` (counted from 1) whose last epoch's KL is
        ``kl``."""
        every = args.ref_refresh_every and step % args.ref_refresh_every == 0
        return bool(every) or (args.ref_refresh_kl is not None and kl > args.ref_refresh_kl)

    def refresh(self, policy: Any) -> None:
        """The current policy becomes the reference."""
        self.snapshot = {
            name: p.detach().clone() for name, p in policy.named_parameters() if p.requires_grad
        }

    def logprobs(
        self,
        policy: Any,
        sequences: list[TrainSequence],
        args: SamplingArgs,
        *,
        logprobs: LogProbs = sequence_logprobs,
    ) -> list[torch.Tensor]:
        """The reference's log-probs of every trained token, per sequence."""
        if self.snapshot is None:
            return reference_logprobs(policy, sequences, args, logprobs=logprobs)
        params = dict(policy.named_parameters())
        with torch.no_grad():
            current = {name: params[name].detach().clone() for name in self.snapshot}
            for name, value in self.snapshot.items():
                params[name].copy_(value)
            try:
                return [
                    logprobs(policy, s.ids, s.positions, temperature=args.temperature)
                    for s in sequences
                ]
            finally:
                for name, value in current.items():
                    params[name].copy_(value)


def accumulate_gradients(
    policy: Any,
    sequences: list[TrainSequence],
    refs: list[torch.Tensor],
    args: GRPOArgs,
    *,
    olds: list[torch.Tensor] | None = None,
    logprobs: LogProbs = sequence_logprobs,
) -> dict[str, float]:
    """Backward of the step's loss, one sequence at a time (their sum is the step's loss).

    Args:
        policy: the PEFT policy, in the mode of the update (train: LoRA dropout on).
        sequences: the step's sequences.
        refs: the reference log-probs of each sequence's trained tokens.
        args: the update's settings.
        olds: the old policy's log-probs per sequence. None or empty: this is the first epoch,
            whose own log-probs, detached, are the old ones (ρ = 1 exactly); they are appended
            to ``olds`` when it is a list, for the later epochs.
        logprobs: reads a sequence's token log-probs
            (``logprobs.full_logits_sequence_logprobs`` is the naive form the benchmark
            compares).

    Returns:
        The summed loss and KL, clipped and trained tokens, max |ρ − 1|, and on the first epoch
        the max |log π − rollout-time log π| (``rollout_logprob_max_dev``).
    """
    first = not olds
    stats = _empty_stats(first)
    recorded: list[torch.Tensor] = [] if olds is None else olds
    for i, (s, ref) in enumerate(zip(sequences, refs, strict=True)):
        new = logprobs(policy, s.ids, s.positions, temperature=args.temperature)
        device = new.device
        if first:
            old = new.detach()  # the same forward (dropout mask, dtype) as the gradient's
            recorded.append(old)
            if s.old:  # the sampler's numbers: measured, not used
                dev = (old.float() - _tensor(s.old, device)).abs().max()
                stats["rollout_logprob_max_dev"] = max(stats["rollout_logprob_max_dev"], float(dev))
        else:
            old = recorded[i]
        parts = policy_loss(
            new,
            old,
            ref,
            _tensor(s.advantages, device),
            _tensor(s.weights, device),
            clip=args.clip,
            beta=beta(args),
        )
        parts.loss.backward()
        _add_parts(stats, parts)
    return stats


def _empty_stats(first: bool) -> dict[str, float]:
    """The statistics of ``accumulate_gradients`` before its first sequence, with
    ``rollout_logprob_max_dev`` on the ``first`` epoch only."""
    # the counts (clipped, tokens) stay ints in the logged JSON
    stats: dict[str, float] = {
        "loss": 0.0,
        "kl": 0.0,
        "clipped": 0,
        "ratio_max_dev": 0.0,
        "tokens": 0,
    }
    if first:
        stats["rollout_logprob_max_dev"] = 0.0
    return stats


def _add_parts(stats: dict[str, float], parts: LossParts) -> None:
    """Adds one sequence's loss terms to ``stats``: sums of the loss, KL and counts, the
    running max of |ρ − 1|."""
    stats["loss"] += float(parts.loss.detach())
    stats["kl"] += parts.kl
    stats["clipped"] += parts.clipped
    stats["ratio_max_dev"] = max(stats["ratio_max_dev"], parts.ratio_max_dev)
    stats["tokens"] += parts.tokens


def update(
    policy: Any,
    optimizer: torch.optim.Optimizer,
    params: list[torch.nn.Parameter],
    sequences: list[TrainSequence],
    args: GRPOArgs,
    *,
    logprobs: LogProbs | None = None,
    reference: Reference | None = None,
) -> list[dict[str, float]]:
    """``epochs`` optimiser steps on one batch of rollouts; returns each epoch's stats.

    ``reference`` is the KL reference (default: the starting policy, adapter disabled)."""
    if logprobs is None:
        logprobs = functools.partial(sequence_logprobs, chunk=args.chunk)
    reference = reference or Reference()
    policy.eval()  # the reference is read without dropout
    refs = reference.logprobs(policy, sequences, args, logprobs=logprobs)
    policy.train()
    out = []
    olds: list[torch.Tensor] = []  # filled by the first epoch, read by the later ones
    for _ in range(args.epochs):
        optimizer.zero_grad(set_to_none=True)
        stats = accumulate_gradients(policy, sequences, refs, args, olds=olds, logprobs=logprobs)
        stats["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, args.grad_clip))
        optimizer.step()
        out.append(stats)
    policy.eval()
    return out
