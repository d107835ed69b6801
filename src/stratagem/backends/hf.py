"""Local transformers backend: batched generation, per-sequence action stopping, constrained
action distributions, optional PEFT adapter (SPEC §4.2, §4.3).

One ``generate`` call runs all pending chats (left padding, longest first, in chunks of
``max_batch``). A sequence stops as soon as its last non-empty line holds a legal action and no
``<think>`` is left open. ``choice_probs`` runs the prompt once and scores every legal action with
a trie over its tokens: at each branching point only the children's logits survive the mask, so
actions that share a first sub-token are told apart at their shortest distinguishing prefix.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stratagem.backends.base import Chat, Generation, Sampling, StopCheck
from stratagem.backends.embedded import EMBEDDED, EMBEDDED_NAME, embedded_dir
from stratagem.backends.prefix_cache import PrefixStore


def _torch():
    import torch

    return torch


def pick_dtype(dtype: str):
    """``auto``: bf16 where the CPU has native bf16 (AVX512-BF16/AMX) or on GPU, else fp32."""
    torch = _torch()
    if dtype != "auto":
        return getattr(torch, dtype)
    if torch.cuda.is_available():
        return torch.bfloat16
    return torch.bfloat16 if torch.cpu._is_avx512_bf16_supported() else torch.float32


class HFBackend:
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
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own progress bar is the one to watch
        torch = _torch()
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
        self.return_ids = False  # trainers need the exact token ids of prompts and answers
        self.store = PrefixStore(max_entries=2 * max_batch)
        self._heads: dict[tuple[int, ...], Any] = {}
        self._chains: _Chains | None = None  # token-level chat continuation (trainers only)

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
        self.tokenizer.padding_side = "left"
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.max_batch = max_batch
        self.prefix_reuse = prefix_reuse
        self.return_ids = True
        self.store = PrefixStore(max_entries=4 * max_batch, max_bytes=max_cache_bytes)
        self._heads: dict[tuple[int, ...], Any] = {}
        self._chains = _Chains()
        return self

    def reset_prefix_cache(self) -> None:
        """Forgets every stored prompt KV cache, the cached system turns included (and the token
        ids of earlier turns: a new policy's chats start afresh)."""
        self.store.clear()
        self._heads.clear()
        if self._chains is not None:
            self._chains.clear()

    def render(self, chat: Chat) -> str:
        """Returns the prompt text of ``chat``: the chat template with the generation prompt."""
        return self.tokenizer.apply_chat_template(
            list(chat), tokenize=False, add_generation_prompt=True
        )

    def _system_head(self, chat: Chat) -> str:
        """The rendered system turn when the prompt starts with it, else ''."""
        if not chat or chat[0].get("role") != "system":
            return ""
        head = self.tokenizer.apply_chat_template([dict(chat[0])], tokenize=False)
        return head if self.render(chat).startswith(head) else ""

    def _tokenize(self, chat: Chat, prompt: str | None = None) -> tuple[list[int], int]:
        """Prompt ids, tokenized as system turn + the rest so token boundaries stay stable;
        and the number of system-turn tokens.

        With chained ids (trainers), a chat that continues one this backend answered starts with
        that chat's exact prompt and answer ids, and only the new turn is tokenized: the model
        is conditioned on the tokens it sampled, not on a re-tokenization of their text.
        """
        prompt = prompt if prompt is not None else self.render(chat)
        head = self._system_head(chat)
        ids = self.tokenizer(head, add_special_tokens=False).input_ids if head else []
        if self._chains is not None:
            before = self._chains.continued(chat, prompt, self.render)
            if before is not None:
                known, text = before
                rest = self.tokenizer(prompt[len(text) :], add_special_tokens=False).input_ids
                return known + rest, len(ids)
        return ids + self.tokenizer(prompt[len(head) :], add_special_tokens=False).input_ids, len(
            ids
        )

    def _lookup(self, row: list[int], head_len: int) -> tuple[int, Any]:
        """The longest reusable prefix of ``row``: a stored prompt, or at least the system turn
        (computed once and kept, so every first round of an episode reuses it)."""
        n, layers = self.store.longest(row)
        if n >= head_len or head_len == 0:
            return n, layers
        key = tuple(row[:head_len])
        if key not in self._heads:
            torch = _torch()
            with torch.inference_mode():
                cache = self.model(
                    torch.tensor([list(key)], device=self.device), use_cache=True
                ).past_key_values
            self._heads[key] = [(layer.keys[0], layer.values[0]) for layer in cache.layers]
        return head_len, self._heads[key]

    def _encode(self, chats: Sequence[Chat]) -> _Encoded:
        """Token ids and, with prefix reuse, the cached KV of each row's longest known prefix.

        Rows are laid out ``[left padding][cached prefix][middle padding][new tokens]``: the
        attention mask hides both paddings and position ids follow the mask, so only the new
        tokens are computed. Without reuse rows are plainly left-padded.
        """
        torch = _torch()
        prompts = [self.render(c) for c in chats]
        tokenized = [self._tokenize(c, p) for c, p in zip(chats, prompts, strict=True)]
        rows = [ids for ids, _ in tokenized]
        hits = [
            self._lookup(ids, head) if self.prefix_reuse else (0, None) for ids, head in tokenized
        ]
        reused = max(n for n, _ in hits)
        rests = [r[n:] for r, (n, _) in zip(rows, hits, strict=True)]
        width = max(len(x) for x in rests)
        pad = self.tokenizer.pad_token_id
        ids, mask = [], []
        for row, (n, _), rest in zip(rows, hits, rests, strict=True):
            ids.append([pad] * (reused - n) + row[:n] + [pad] * (width - len(rest)) + rest)
            mask.append([0] * (reused - n) + [1] * n + [0] * (width - len(rest)) + [1] * len(rest))
        cache = self._batch_cache(hits, reused) if reused else None
        return _Encoded(
            input_ids=torch.tensor(ids, device=self.device),
            attention_mask=torch.tensor(mask, device=self.device),
            cache=cache,
            prefix_len=reused,
            prompt_tokens=[len(r) for r in rows],
            prefill_tokens=[len(x) for x in rests],
            rows=rows,
            prompts=prompts,
        )

    def _batch_cache(self, hits: list[tuple[int, Any]], reused: int):
        """A DynamicCache of the rows' reused prefixes, left-padded to ``reused`` tokens."""
        torch = _torch()
        from transformers import DynamicCache

        n_layers = self.model.config.num_hidden_layers
        layers = []
        for layer in range(n_layers):
            keys, values = [], []
            for n, stored in hits:
                k, v = stored[layer] if stored is not None else self._empty_kv(layer)
                k, v = k[:, :n], v[:, :n]
                gap = reused - n
                if gap:
                    k = torch.nn.functional.pad(k, (0, 0, gap, 0))
                    v = torch.nn.functional.pad(v, (0, 0, gap, 0))
                keys.append(k)
                values.append(v)
            layers.append((torch.stack(keys), torch.stack(values)))
        return DynamicCache(layers, config=self.model.config)

    def _empty_kv(self, layer: int):
        torch = _torch()
        cfg = self.model.config
        heads = getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        empty = torch.zeros(heads, 0, head_dim, dtype=self.dtype, device=self.device)
        return empty, empty

    def _remember(self, enc: _Encoded, cache) -> None:
        """Store each row's prompt KV (taken from the cache generate filled) for later turns."""
        if not self.prefix_reuse:
            return
        torch = _torch()
        width = enc.input_ids.shape[1]
        for i, row in enumerate(enc.rows):
            idx = torch.nonzero(enc.attention_mask[i, :width]).squeeze(1)
            layers = [
                (layer.keys[i][:, idx].clone(), layer.values[i][:, idx].clone())
                for layer in cache.layers
            ]
            self.store.add(row, layers)

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
        out: list[Generation | None] = [None] * len(chats)
        for start in range(0, len(order), self.max_batch):
            idx = order[start : start + self.max_batch]
            rows = [chats[i] for i in idx]
            checks = [stop[i] for i in idx] if stop is not None else None
            row_seeds = [seeds[i] if seeds else 0 for i in idx]
            for i, gen in zip(
                idx, self._generate_chunk(rows, sampling, checks, row_seeds), strict=True
            ):
                out[i] = gen
        return out  # type: ignore[return-value]

    def _generate_chunk(
        self,
        chats: list[Chat],
        sampling: Sampling,
        checks: list[StopCheck | None] | None,
        seeds: list[int],
    ) -> list[Generation]:
        torch = _torch()
        from transformers import LogitsProcessorList, StoppingCriteriaList

        start = time.perf_counter()
        enc = self._encode(chats)
        width = enc.input_ids.shape[1]
        if checks is not None and not any(checks):
            checks = None
        stops = StoppingCriteriaList([_DoneStop(self.tokenizer, width, checks)] if checks else [])
        # our own per-row sampler picks each token; generate then decodes "greedily" the one
        # token the sampler left (transformers' own sampling shares one RNG across the batch)
        sampler = None if sampling.greedy else RowSampler(seeds, sampling, self.device)
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
        with torch.inference_mode():
            if enc.cache is not None:
                kwargs["past_key_values"] = enc.cache
            result = self.model.generate(
                input_ids=enc.input_ids,
                attention_mask=enc.attention_mask,
                max_new_tokens=sampling.max_new_tokens,
                stopping_criteria=stops,
                pad_token_id=self.tokenizer.pad_token_id,
                return_dict_in_generate=True,
                **kwargs,
            )
            self._remember(enc, result.past_key_values)
        output = result.sequences
        seconds = (time.perf_counter() - start) / len(chats)
        new = output[:, width:]
        logprobs = sampler.chosen_logprobs() if sampler is not None else None  # (B, steps)
        gens = []
        for i, (row, n_prompt, n_prefill, prompt_ids) in enumerate(
            zip(new, enc.prompt_tokens, enc.prefill_tokens, enc.rows, strict=True)
        ):
            ids = _strip_padding(row.tolist(), self.tokenizer)
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            hit_limit = len(ids) >= sampling.max_new_tokens
            finish = "length" if hit_limit else "stop"
            check = checks[len(gens)] if checks is not None else None
            if check is not None and check(text):
                finish = "action"
            info: dict[str, Any] = {}
            if self.return_ids:
                info = {"prompt_ids": prompt_ids, "token_ids": ids}
                if logprobs is not None:
                    info["token_logprobs"] = logprobs[i, : len(ids)].tolist()
                if self._chains is not None:
                    self._chains.add(enc.prompts[i], text, prompt_ids + ids)
            gens.append(
                Generation(
                    text=text,
                    tokens=len(ids),
                    prompt_tokens=n_prompt,
                    prefill_tokens=n_prefill,
                    finish_reason=finish,
                    seconds=seconds,
                    info=info,
                )
            )
        return gens

    def next_token_logprobs(self, chats: Sequence[Chat]):
        """Log-probabilities of the first answer token for each chat, batched: (B, V)."""
        torch = _torch()
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
                        past_key_values=enc.cache,
                    ).logits
            rows.append(torch.log_softmax(logits[:, -1].float(), dim=-1))
        return torch.cat(rows)

    def choice_probs(self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]):
        """Returns, for each chat, the distribution over its choices at the start of the answer.

        Choices told apart by their first sub-token are read from one batched forward pass; a chat
        whose choices share leading sub-tokens is run again on its own and scored at their shortest
        distinguishing prefix (SPEC §4.3).
        """
        first = self.next_token_logprobs(chats)  # (B, V)
        out = []
        for i, (chat, cs) in enumerate(zip(chats, choices, strict=True)):
            token_ids = [self.tokenizer(c, add_special_tokens=False).input_ids for c in cs]
            trie = _Trie.build(token_ids)
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
        torch = _torch()
        token_ids = [self.tokenizer(c, add_special_tokens=False).input_ids for c in choices]
        trie = _Trie.build(token_ids)
        prompt_ids = self.tokenizer(
            prompt, return_tensors="pt", add_special_tokens=False
        ).input_ids.to(self.device)
        depth = trie.depth
        # teacher-force every choice's distinguishing prefix after the prompt in one batch
        with torch.inference_mode():
            out = self.model(prompt_ids, use_cache=True)
            first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)  # (V,)
            logps = [first] * len(choices)
            if depth > 1:
                cont = [
                    ids[: depth - 1] + [ids[-1]] * (depth - 1 - len(ids[: depth - 1]))
                    for ids in token_ids
                ]
                batch = torch.tensor(cont, device=self.device)  # (C, depth-1)
                cache = out.past_key_values
                cache.batch_repeat_interleave(len(choices))
                mask = torch.ones(
                    len(choices),
                    prompt_ids.shape[1] + batch.shape[1],
                    dtype=torch.long,
                    device=self.device,
                )
                deeper = self.model(batch, past_key_values=cache, attention_mask=mask)
                deep_logps = torch.log_softmax(deeper.logits.float(), dim=-1)  # (C, depth-1, V)
                logps = [(first, *deep_logps[c]) for c in range(len(choices))]
            else:
                logps = [(first,) for _ in choices]
        scores = [trie.score(ids, lp) for ids, lp in zip(token_ids, logps, strict=True)]
        total = sum(scores)
        return {c: s / total for c, s in zip(choices, scores, strict=True)}


@dataclass
class _Encoded:
    input_ids: Any  # (B, P + W): [prefix][padding][rest] or left-padded whole prompts
    attention_mask: Any  # (B, P + W)
    cache: Any  # KV cache of the shared prefix, repeated B times, or None
    prefix_len: int
    prompt_tokens: list[int]
    prefill_tokens: list[int]
    rows: list[list[int]]
    prompts: list[str]  # the rendered prompt text of each row


@dataclass
class _Trie:
    children: dict[int, _Trie]
    leaf: bool = False

    @classmethod
    def build(cls, sequences: list[list[int]]) -> _Trie:
        root = cls({})
        for seq in sequences:
            node = root
            for t in seq:
                node = node.children.setdefault(t, cls({}))
            node.leaf = True
        return root

    @property
    def branch_depth(self) -> int:
        """The deepest level (root = 0) at which the trie branches; -1 if it never does."""
        deepest = 0 if len(self.children) > 1 else -1
        for child in self.children.values():
            d = child.branch_depth
            if d >= 0:
                deepest = max(deepest, d + 1)
        return deepest

    @property
    def depth(self) -> int:
        return 1 + max((c.depth for c in self.children.values()), default=0) if self.children else 0

    def score(self, ids: list[int], logps) -> float:
        """Π over branching points on the path of softmax restricted to the children."""
        torch = _torch()
        node, p = self, 1.0
        for pos, t in enumerate(ids):
            if len(node.children) > 1:
                kids = list(node.children)
                restricted = torch.softmax(logps[pos][kids], dim=-1)
                p *= float(restricted[kids.index(t)])
            node = node.children[t]
            if len(node.children) == 0:
                break
        return p


class RowSampler:
    """A logits processor that samples every row with its own ``torch.Generator``.

    Each row's generator is seeded with that row's decision seed and advances once per generated
    token of that row, so the sampled text is a function of (prompt, seed) alone. Temperature and
    top-p are applied here; the returned scores leave only the sampled token finite, so greedy
    decoding emits it. Naive equivalent: ``torch.multinomial(softmax(logits / T), 1,
    generator=g_row)`` for each row separately.
    """

    def __init__(self, seeds: Sequence[int], sampling: Sampling, device: Any):
        torch = _torch()
        self.temperature = sampling.temperature
        self.top_p = sampling.top_p
        self.generators = [
            torch.Generator(device=device).manual_seed(int(s) % (2**63)) for s in seeds
        ]
        self._chosen: list[Any] = []  # per step, (B,): log π_T of each row's sampled token

    def __call__(self, input_ids, scores):
        """Returns scores that leave only each row's sampled next token finite (0, the rest −inf),
        advancing each row's generator once.
        """
        torch = _torch()
        logp = torch.log_softmax(scores.float() / self.temperature, dim=-1)  # (B, V)
        probs = logp.exp()
        if self.top_p < 1.0:
            sorted_p, order = torch.sort(probs, dim=-1, descending=True)
            # keep the smallest prefix whose mass reaches top_p (always the top token)
            outside = sorted_p.cumsum(-1) - sorted_p >= self.top_p
            sorted_p = sorted_p.masked_fill(outside, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        picked = torch.stack(
            [torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(self.generators)]
        )  # (B,)
        self._chosen.append(logp[torch.arange(len(picked)), picked])
        out = torch.full_like(scores, float("-inf"))
        out[torch.arange(len(picked)), picked] = 0.0
        return out

    def chosen_logprobs(self):
        """(B, steps): the log-probability at the sampling temperature (before top-p truncation)
        of every token each row sampled — the behaviour policy's, recorded at rollout time."""
        torch = _torch()
        if not self._chosen:
            return torch.zeros(len(self.generators), 0)
        return torch.stack(self._chosen, dim=1).cpu()


class _DoneStop:
    """Per-sequence stop once that sequence's check says its answer is complete."""

    def __init__(self, tokenizer, prompt_width: int, checks: list[StopCheck | None]):
        self.tokenizer = tokenizer
        self.width = prompt_width
        self.checks = checks

    def __call__(self, input_ids, scores, **kwargs):
        torch = _torch()
        done = []
        for row, check in zip(input_ids, self.checks, strict=True):
            if check is None:
                done.append(False)
                continue
            text = self.tokenizer.decode(row[self.width :], skip_special_tokens=True)
            done.append(check(text))
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class _Chains:
    """The exact token ids of chats a trainer's backend answered, keyed by their text, so the
    next turn of the same chat continues from those ids (bounded, least recently used first).

    Naive equivalent: tokenize the whole rendered chat again at every turn; that re-reads the
    sampled answers as text, whose tokenization may differ from the sampled ids.
    """

    def __init__(self, max_entries: int = 4096):
        from collections import OrderedDict

        self.max_entries = max_entries
        self._ids: OrderedDict[str, list[int]] = OrderedDict()

    def add(self, prompt: str, answer: str, ids: list[int]) -> None:
        """Remember that the rendered chat ``prompt`` answered with ``answer`` is ``ids``."""
        key = prompt + answer
        self._ids[key] = ids
        self._ids.move_to_end(key)
        while len(self._ids) > self.max_entries:
            self._ids.popitem(last=False)

    def continued(self, chat: Chat, prompt: str, render) -> tuple[list[int], str] | None:
        """(ids, text) of the longest answered prefix of ``chat`` whose rendering ``prompt``
        continues, or None."""
        for i in range(len(chat) - 1, 0, -1):
            if chat[i].get("role") != "assistant":
                continue
            text = render(chat[:i]) + chat[i]["content"]
            ids = self._ids.get(text)
            if ids is not None and prompt.startswith(text):
                self._ids.move_to_end(text)
                return list(ids), text
            return None  # only the seat's last answer can have been answered by this backend
        return None

    def clear(self) -> None:
        """Forgets every chat."""
        self._ids.clear()


def _strip_padding(ids: list[int], tokenizer) -> list[int]:
    """Generated ids up to (not including) the first pad/eos token."""
    stop = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    for i, t in enumerate(ids):
        if t in stop:
            return ids[:i]
    return ids
