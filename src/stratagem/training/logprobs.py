"""Log-probabilities of chosen tokens without materialising the full-vocabulary log-softmax.

``chunked_token_logprobs`` projects hidden states to logits 32 positions at a time and keeps only
the chosen tokens' log-probabilities; with ``checkpoint=True`` each chunk's logits are recomputed
in the backward pass instead of stored, so peak memory is O(B·32·V) instead of O(B·T·V).

Naive equivalent (what the tests compare against)::

    logits = hidden @ weight.T                                    # (B, T, V)
    logp = logits.log_softmax(-1).gather(-1, targets[..., None])  # (B, T, 1)
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint as _checkpoint

CHUNK = 32


def naive_token_logprobs(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """(B, T, H), (V, H), (B, T) -> (B, T) via the full (B, T, V) log-softmax."""
    logits = hidden @ weight.T  # (B, T, V)
    return logits.float().log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)


def _chunk(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = (hidden @ weight.T).float()  # (B, c, V)
    chosen = logits.gather(-1, targets[..., None]).squeeze(-1)  # (B, c)
    return chosen - torch.logsumexp(logits, dim=-1)  # (B, c)


def chunked_token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    chunk: int = CHUNK,
    checkpoint: bool = True,
) -> torch.Tensor:
    """(B, T, H), (V, H), (B, T) -> (B, T), ``chunk`` positions at a time."""
    pieces = []
    for start in range(0, hidden.shape[1], chunk):
        h = hidden[:, start : start + chunk]
        t = targets[:, start : start + chunk]
        if checkpoint and torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad):
            pieces.append(_checkpoint(_chunk, h, weight, t, use_reentrant=False))
        else:
            pieces.append(_chunk(h, weight, t))
    return torch.cat(pieces, dim=1)
