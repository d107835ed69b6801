"""The hf backend's decoding hooks: per-row seeded sampling and per-row stopping.

transformers' own sampling draws every row of a batch from one RNG, so a row's text would depend
on what shares its batch; ``RowSampler`` gives each row its own generator. ``DoneStop`` ends a
row as soon as its stop check holds on the text so far (an action on the last line, SPEC §4.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stratagem.backends.base import Sampling, StopCheck


class RowSampler:
    """A logits processor that samples every row with its own ``torch.Generator``.

    Each row's generator is seeded with that row's decision seed and advances once per generated
    token of that row, so the sampled text is a function of (prompt, seed) alone. Temperature and
    top-p are applied here; the returned scores leave only the sampled token finite, so greedy
    decoding emits it. Naive equivalent: ``torch.multinomial(softmax(logits / T), 1,
    generator=g_row)`` for each row separately.
    """

    def __init__(self, seeds: Sequence[int], sampling: Sampling, device: Any):
        import torch

        self.temperature = sampling.temperature
        self.top_p = sampling.top_p
        self.generators = [
            torch.Generator(device=device).manual_seed(int(s) % (2**63)) for s in seeds
        ]
        self._chosen: list[Any] = []  # per step, (B,): log π_T of each row's sampled token

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Returns scores that leave only each row's sampled next token finite (0, the rest −inf),
        advancing each row's generator once.
        """
        import torch

        picked, chosen = sample_rows(scores, self.generators, self.temperature, self.top_p)
        self._chosen.append(chosen)
        out = torch.full_like(scores, float("-inf"))
        out[torch.arange(len(picked)), picked] = 0.0
        return out

    def chosen_logprobs(self) -> Any:
        """(B, steps): the log-probability at the sampling temperature (before top-p truncation)
        of every token each row sampled — the behaviour policy's, recorded at rollout time."""
        import torch

        if not self._chosen:
            return torch.zeros(len(self.generators), 0)
        return torch.stack(self._chosen, dim=1).cpu()


def sample_rows(
    scores: Any, generators: Sequence[Any], temperature: float, top_p: float = 1.0
) -> tuple[Any, Any]:
    """Draws one token per row of ``scores`` (B, V), row i from ``generators[i]`` (advanced
    once), at ``temperature`` within the top-p mass; returns the tokens (B,) and their
    log-probabilities at the temperature before top-p truncation (B,). ``RowSampler`` and the
    llama.cpp engine sample with it, so both draw alike from the same scores and seeds."""
    import torch

    logp = torch.log_softmax(scores.float() / temperature, dim=-1)  # (B, V)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        # keep the smallest prefix whose mass reaches top_p (always the top token)
        outside = sorted_p.cumsum(-1) - sorted_p >= top_p
        sorted_p = sorted_p.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    picked = torch.stack(
        [torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(generators)]
    )  # (B,)
    return picked, logp[torch.arange(len(picked)), picked]


class DoneStop:
    """Per-sequence stop once that sequence's check says its answer is complete."""

    def __init__(self, tokenizer: Any, prompt_width: int, checks: Sequence[StopCheck | None]):
        self.tokenizer = tokenizer
        self.width = prompt_width
        self.checks = checks

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        """Returns a (B,) bool tensor: whether each row's generated text passes its check."""
        import torch

        done = []
        for row, check in zip(input_ids, self.checks, strict=True):
            if check is None:
                done.append(False)
                continue
            text = self.tokenizer.decode(row[self.width :], skip_special_tokens=True)
            done.append(check(text))
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def strip_padding(ids: list[int], tokenizer: Any) -> list[int]:
    """Generated ids up to (not including) the first pad/eos token."""
    stop = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    for i, t in enumerate(ids):
        if t in stop:
            return ids[:i]
    return ids
