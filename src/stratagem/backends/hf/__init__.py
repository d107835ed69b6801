"""Local transformers backend: batched generation, per-sequence action stopping, constrained
action distributions, optional PEFT adapter (SPEC §4.2, §4.3).

One ``generate`` call runs all pending chats (left padding, longest first, in chunks of
``max_batch``). A sequence stops as soon as its last non-empty line holds a legal action and no
``<think>`` is left open. ``choice_probs`` runs the prompt once and scores every legal action with
a trie over its tokens: at each branching point only the children's logits survive the mask, so
actions that share a first sub-token are told apart at their shortest distinguishing prefix.

Its parts: prompt encoding and prefix KV reuse in ``hf.prompts``, the per-row sampler and stop
in ``hf.sampling``, the choice trie in ``trie``, trainers' chained token ids in ``chains``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

from stratagem.backends.base import Chat, FinishReason, Generation, Sampling, StopCheck
from stratagem.backends.cache import weights_fingerprint
from stratagem.backends.chains import Chains
from stratagem.backends.embedded import EMBEDDED, EMBEDDED_NAME, embedded_dir
from stratagem.backends.hf.prompts import Encoded, PromptEncoder, cache_name
from stratagem.backends.hf.sampling import DoneStop, RowSampler, strip_padding
from stratagem.backends.prefix_cache import Layers, PrefixStore
from stratagem.backends.trie import Trie

__all__ = ["HFBackend", "RowSampler", "pick_dtype"]


def pick_dtype(dtype: str) -> Any:
    """``auto``: bf16 where the CPU has native bf16 (AVX512-BF16/AMX) or on GPU, else fp32."""
    import torch

    if dtype != "auto":
        return getattr(torch, dtype)
    if torch.cuda.is_available():
        return torch.bfloat16
    return torch.bfloat16 if torch.cpu._is_avx512_bf16_supported() else torch.float32


class HFBackend(PromptEncoder):
    """A local transformers model as a ``Backend`` (SPEC §4.2), optionally with a PEFT adapter.

    Args:
        model: ``embedded`` (the bundled SmolLM2, SPEC §4.2), a hub id or a local folder.
        adapter: A PEFT adapter folder, or several separated by commas: each but the last is merged
            into the weights, the last stays a live adapter.
        dtype: A torch dtype name, or ``auto`` (see ``pick_dtype``).
        max_batch: The most chats one forward pass runs.
        device: Where the model runs; default CUDA when available, else CPU.
        prefix_reuse: Whether prompts reuse the stored KV cache of their longest computed prefix.
    """

    model_id: str
    max_batch: int
    return_ids: bool  # trainers need the exact token ids of prompts and answers

    def __init__(
        self,
        model: str = EMBEDDED,
        *,
        adapter: str | None = None,
        dtype: str = "auto",
        max_batch: int = 64,
        device: str | None = None,
        prefix_reuse: bool = True,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own progress bar is the one to watch
        path = str(embedded_dir()) if model == EMBEDDED else model
        self.model_id = (EMBEDDED_NAME if model == EMBEDDED else model) + (
            f"+{adapter}" if adapter else ""
        )
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = pick_dtype(dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype).to(self.device)
        self._weights = (path, adapter.split(",") if adapter else [])
        if adapter:
            from peft import PeftModel

            # "sft,sepo": a stack — each adapter but the last is merged into the weights first
            *below, top = adapter.split(",")
            for folder in below:
                self.model = PeftModel.from_pretrained(self.model, folder).merge_and_unload()
            self.model = PeftModel.from_pretrained(self.model, top)
        self.model.eval()
        self.max_batch = max_batch
        self.prefix_reuse = prefix_reuse
        self.return_ids = False
        self.store = PrefixStore(max_entries=2 * max_batch)
        self._heads: dict[tuple[int, ...], Layers] = {}
        self._chains: Chains | None = None

    @functools.cached_property
    def fingerprint(self) -> str:
        """The response cache's key for this model: its id, a content hash of the weights,
        adapters and dtype, and a hub model's revision. Computed on first use (it reads every
        weights file once), so only a caching caller pays for it."""
        path, adapters = self._weights
        revision = getattr(self.model.config, "_commit_hash", None) or ""
        digest = weights_fingerprint(path, adapters, str(self.dtype))
        return f"{self.model_id}#{digest}{'@' + revision if revision else ''}"

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        model_id: str,
        max_batch: int = 64,
        *,
        prefix_reuse: bool = False,
        max_cache_bytes: int = 4 << 30,
    ) -> HFBackend:
        """Wrap an already loaded model (a trainer's policy) without reloading it.

        The backend returns token ids and the sampled tokens' log-probabilities, and continues
        each seat's chat from the exact tokens of its earlier prompts and answers (see
        ``generate``). ``prefix_reuse`` keeps prompt KV caches between calls: a trainer turns it on
        for its rollouts and calls ``reset_prefix_cache`` whenever the weights change.
        """
        self = cls.__new__(cls)
        self.model, self.tokenizer, self.model_id = model, tokenizer, model_id
        self.fingerprint = model_id  # a live policy: its weights change; the caller names them
        self.tokenizer.padding_side = "left"
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.max_batch = max_batch
        self.prefix_reuse = prefix_reuse
        self.return_ids = True
        self.store = PrefixStore(max_entries=4 * max_batch, max_bytes=max_cache_bytes)
        self._heads = {}
        self._chains = Chains()
        return self

    def reset_prefix_cache(self) -> None:
        """Forgets every stored prompt KV cache, the cached system turns included (and the token
        ids of earlier turns: a new policy's chats start afresh)."""
        self.store.clear()
        self._heads.clear()
        if self._chains is not None:
            self._chains.clear()

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        *,
        seeds: Sequence[int] | None = None,
        stop: Sequence[StopCheck | None] | None = None,
    ) -> list[Generation]:
        """Returns one completion per chat (see ``Backend.generate``).

        Chats run longest first in chunks of ``max_batch``. Sampled rows draw from their own
        generator seeded by their decision seed, so a row's text depends only on (chat, seed):
        not on which other chats share the batch or the chunk.
        """
        sizes = [sum(len(m["content"]) for m in c) for c in chats]
        order = sorted(range(len(chats)), key=lambda i: -sizes[i])
        out: dict[int, Generation] = {}
        for start in range(0, len(order), self.max_batch):
            idx = order[start : start + self.max_batch]
            rows = [chats[i] for i in idx]
            checks = [stop[i] for i in idx] if stop is not None else None
            row_seeds = [seeds[i] if seeds else 0 for i in idx]
            for i, gen in zip(
                idx, self._generate_chunk(rows, sampling, checks, row_seeds), strict=True
            ):
                out[i] = gen
        return [out[i] for i in range(len(chats))]

    def _generate_chunk(
        self,
        chats: list[Chat],
        sampling: Sampling,
        checks: list[StopCheck | None] | None,
        seeds: list[int],
    ) -> list[Generation]:
        """One batched ``model.generate`` over ``chats``; their generations, in order."""
        import torch
        from transformers import StoppingCriteriaList

        start = time.perf_counter()
        enc = self._encode(chats)
        width = enc.input_ids.shape[1]
        if checks is not None and not any(checks):
            checks = None
        stops = StoppingCriteriaList([DoneStop(self.tokenizer, width, checks)] if checks else [])
        # our own per-row sampler picks each token; generate then decodes "greedily" the one
        # token the sampler left (transformers' own sampling shares one RNG across the batch)
        sampler = None if sampling.greedy else RowSampler(seeds, sampling, self.device)
        kwargs = self._decoding_kwargs(sampler)
        with torch.inference_mode():
            if enc.cache is not None:
                kwargs[cache_name()] = enc.cache
            result = self.model.generate(
                input_ids=enc.input_ids,
                attention_mask=enc.attention_mask,
                max_new_tokens=sampling.max_new_tokens,
                stopping_criteria=stops,
                pad_token_id=self.tokenizer.pad_token_id,
                return_dict_in_generate=True,
                **kwargs,
            )
            self._remember(enc, getattr(result, cache_name()))
        output = result.sequences
        seconds = (time.perf_counter() - start) / len(chats)
        new = output[:, width:]
        logprobs = sampler.chosen_logprobs() if sampler is not None else None  # (B, steps)
        return [
            self._generation(
                enc, i, row, sampling, checks[i] if checks is not None else None, logprobs, seconds
            )
            for i, row in enumerate(new)
        ]

    def _decoding_kwargs(self, sampler: RowSampler | None) -> dict[str, Any]:
        """The ``model.generate`` arguments that hand every token choice to ``sampler`` (none:
        greedy) and switch transformers' own sampling and logits processing off."""
        from transformers import LogitsProcessorList

        processors = LogitsProcessorList([sampler] if sampler is not None else [])
        kwargs: dict[str, Any] = {
            "do_sample": False,
            "temperature": None,
            "top_p": None,
            "top_k": None,
            "logits_processor": processors,
        }
        if self.return_ids:  # a trainer's rollouts sample exactly π_θ at the temperature
            kwargs["repetition_penalty"] = None
        return kwargs

    def _generation(
        self,
        enc: Encoded,
        i: int,
        row: Any,
        sampling: Sampling,
        check: StopCheck | None,
        logprobs: Any,
        seconds: float,
    ) -> Generation:
        """Row ``i`` of a chunk as a ``Generation``: ``row`` its new tokens (padding stripped),
        ``check`` its stop rule, ``logprobs`` the sampler's (B, steps) log-probabilities (None
        when greedy). For a trainer (``return_ids``) it carries the token ids and log-probs,
        and the chat's chain grows by the answer."""
        ids = strip_padding(row.tolist(), self.tokenizer)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        hit_limit = len(ids) >= sampling.max_new_tokens
        finish: FinishReason = "length" if hit_limit else "stop"
        if check is not None and check(text):
            finish = "action"
        prompt_ids = enc.rows[i]
        info: dict[str, Any] = {}
        if self.return_ids:
            info = {"prompt_ids": prompt_ids, "token_ids": ids}
            if logprobs is not None:
                info["token_logprobs"] = logprobs[i, : len(ids)].tolist()
            if self._chains is not None:
                self._chains.add(enc.prompts[i], text, prompt_ids + ids)
        return Generation(
            text=text,
            tokens=len(ids),
            prompt_tokens=enc.prompt_tokens[i],
            prefill_tokens=enc.prefill_tokens[i],
            finish_reason=finish,
            seconds=seconds,
            info=info,
        )

    def next_token_logprobs(self, chats: Sequence[Chat]) -> Any:
        """Log-probabilities of the first answer token for each chat, batched: (B, V)."""
        import torch

        rows = []
        for start in range(0, len(chats), self.max_batch):
            enc = self._encode(chats[start : start + self.max_batch])
            positions = (enc.attention_mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                if enc.cache is None:
                    logits = self.model(
                        input_ids=enc.input_ids,
                        attention_mask=enc.attention_mask,
                        position_ids=positions,
                    ).logits
                else:
                    p = enc.prefix_len
                    logits = self.model(
                        input_ids=enc.input_ids[:, p:],
                        attention_mask=enc.attention_mask,
                        position_ids=positions[:, p:],
                        **{cache_name(): enc.cache},
                    ).logits
            rows.append(torch.log_softmax(logits[:, -1].float(), dim=-1))
        return torch.cat(rows)

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """Returns, for each chat, the distribution over its choices at the start of the answer.

        Choices told apart by their first sub-token are read from one batched forward pass; a chat
        whose choices share leading sub-tokens is run again on its own and scored at their shortest
        distinguishing prefix (SPEC §4.3).
        """
        first = self.next_token_logprobs(chats)  # (B, V)
        out = []
        for i, (chat, cs) in enumerate(zip(chats, choices, strict=True)):
            token_ids = [self.tokenizer(c, add_special_tokens=False).input_ids for c in cs]
            trie = Trie.build(token_ids)
            if trie.branch_depth == 0:  # told apart by their first sub-token: no extra pass
                scores = [trie.score(ids, (first[i],)) for ids in token_ids]
                total = sum(scores)
                out.append({c: s / total for c, s in zip(cs, scores, strict=True)})
            else:
                out.append(self._choice_probs(self.render(chat), cs))
        return out

    def _choice_probs(self, prompt: str, choices: tuple[str, ...]) -> dict[str, float]:
        """Choices that share leading sub-tokens: teacher-force every choice's tokens after the
        prompt in one batch and multiply the masked probabilities at each branching point.
        """
        import torch

        token_ids = [self.tokenizer(c, add_special_tokens=False).input_ids for c in choices]
        trie = Trie.build(token_ids)
        prompt_ids = self.tokenizer(
            prompt, return_tensors="pt", add_special_tokens=False
        ).input_ids.to(self.device)
        depth = trie.depth
        # teacher-force every choice's distinguishing prefix after the prompt in one batch
        logps: list[tuple[Any, ...]]
        with torch.inference_mode():
            out = self.model(prompt_ids, use_cache=True)
            first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)  # (V,)
            if depth > 1:
                cont = [
                    ids[: depth - 1] + [ids[-1]] * (depth - 1 - len(ids[: depth - 1]))
                    for ids in token_ids
                ]
                batch = torch.tensor(cont, device=self.device)  # (C, depth-1)
                cache = getattr(out, cache_name())
                cache.batch_repeat_interleave(len(choices))
                mask = torch.ones(
                    len(choices),
                    prompt_ids.shape[1] + batch.shape[1],
                    dtype=torch.long,
                    device=self.device,
                )
                deeper = self.model(batch, attention_mask=mask, **{cache_name(): cache})
                deep_logps = torch.log_softmax(deeper.logits.float(), dim=-1)  # (C, depth-1, V)
                logps = [(first, *deep_logps[c]) for c in range(len(choices))]
            else:
                logps = [(first,) for _ in choices]
        scores = [trie.score(ids, lp) for ids, lp in zip(token_ids, logps, strict=True)]
        total = sum(scores)
        return {c: s / total for c, s in zip(choices, scores, strict=True)}
