"""Log-probabilities of chosen tokens without the model's full ``(T, V)`` logits (SPEC §6).

``sequence_logprobs`` runs the decoder body (no output head) over a sequence, keeps the final
hidden states only at the positions that predict a trained token, and projects them to the
vocabulary 32 positions at a time (``chunked_token_logprobs``), keeping only the chosen tokens'
log-probabilities. With ``checkpoint=True`` each chunk's logits are recomputed in the backward
pass instead of stored, so peak memory is O(32·V) for the head instead of O(T·V). The logits are
divided by the sampling temperature (the policy the rollouts sampled from) and soft-capped where
the model's config says so (Gemma: ``cap · tanh(logits / cap)``, before the temperature, as
generation does).

Naive equivalent (what the tests compare against)::

    logits = model(ids).logits / temperature                     # (1, T, V)
    logp = logits.log_softmax(-1)[0, positions - 1, ids[positions]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint as _checkpoint

CHUNK = 32


@dataclass(frozen=True)
class Head:
    """The output head of a causal LM: ``logits = softcap(hidden @ weight.T + bias)``."""

    weight: torch.Tensor  # (V, H)
    bias: torch.Tensor | None = None  # (V,)
    softcap: float | None = None

    @classmethod
    def of(cls, model: Any) -> Head:
        """The head of ``model`` (a transformers causal LM, PEFT-wrapped or not)."""
        head = model.get_output_embeddings()
        config = (
            model.config.get_text_config() if hasattr(model.config, "get_text_config") else None
        )
        cap = getattr(config or model.config, "final_logit_softcapping", None)
        return cls(head.weight, getattr(head, "bias", None), cap)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V) in float32."""
        logits = (hidden @ self.weight.T).float()
        if self.bias is not None:
            logits = logits + self.bias.float()
        if self.softcap:
            logits = self.softcap * torch.tanh(logits / self.softcap)
        return logits


def naive_token_logprobs(
    hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """(B, T, H), (V, H), (B, T) -> (B, T) via the full (B, T, V) log-softmax."""
    logits = (hidden @ weight.T).float() / temperature  # (B, T, V)
    return logits.log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)


def _chunk(
    hidden: torch.Tensor, targets: torch.Tensor, head: Head, temperature: float
) -> torch.Tensor:
    logits = head.logits(hidden) / temperature  # (B, c, V)
    chosen = logits.gather(-1, targets[..., None]).squeeze(-1)  # (B, c)
    return chosen - torch.logsumexp(logits, dim=-1)  # (B, c)


def chunked_token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor | Head,
    targets: torch.Tensor,
    *,
    chunk: int = CHUNK,
    checkpoint: bool = True,
    temperature: float = 1.0,
) -> torch.Tensor:
    """(B, T, H), (V, H) or a ``Head``, (B, T) -> (B, T), ``chunk`` positions at a time."""
    head = weight if isinstance(weight, Head) else Head(weight)
    pieces = []
    for start in range(0, hidden.shape[1], chunk):
        h = hidden[:, start : start + chunk]  # (B, c, H)
        t = targets[:, start : start + chunk]  # (B, c)
        grads = h.requires_grad or head.weight.requires_grad
        if checkpoint and torch.is_grad_enabled() and grads:
            pieces.append(_checkpoint(_chunk, h, t, head, temperature, use_reentrant=False))
        else:
            pieces.append(_chunk(h, t, head, temperature))
    return torch.cat(pieces, dim=1)


def final_hidden(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """(B, T) token ids -> (B, T, H) final hidden states (after the last norm), without running
    the output head. A PEFT model's decoder keeps its adapters (and ``disable_adapter``)."""
    body = model.get_base_model() if hasattr(model, "get_base_model") else model
    return body.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state


def sequence_logprobs(
    model: Any,
    ids: Sequence[int],
    positions: Sequence[int] | torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk: int = CHUNK,
) -> torch.Tensor:
    """Log-probabilities (N,) of ``ids[p]`` given ``ids[:p]`` for each p in ``positions`` (N,),
    read from one pass over ``ids``; the full-vocabulary logits exist ``chunk`` rows at a time."""
    device = model.get_output_embeddings().weight.device
    seq = torch.as_tensor(list(ids), device=device)[None]  # (1, T)
    pos = torch.as_tensor(positions, device=device)  # (N,)
    hidden = final_hidden(model, seq)[:, pos - 1]  # (1, N, H): the states that predict ids[pos]
    return chunked_token_logprobs(
        hidden, Head.of(model), seq[:, pos], chunk=chunk, temperature=temperature
    )[0]


def full_logits_sequence_logprobs(
    model: Any,
    ids: Sequence[int],
    positions: Sequence[int] | torch.Tensor,
    *,
    temperature: float = 1.0,
) -> torch.Tensor:
    """The naive form of ``sequence_logprobs``: ``model(ids).logits`` builds all (T, V) logits
    (for the benchmark and the tests; never used in training)."""
    device = model.get_output_embeddings().weight.device
    seq = torch.as_tensor(list(ids), device=device)[None]  # (1, T)
    pos = torch.as_tensor(positions, device=device)
    logits = model(input_ids=seq).logits.float() / temperature  # (1, T, V)
    return logits[0, pos - 1].log_softmax(-1).gather(-1, seq[0, pos][:, None]).squeeze(-1)
