"""Prompt encoding for the hf backend: token ids, and the reused KV cache of known prefixes.

Game prompts are long rules plus a history that grows by a line a round, so prefill dominates.
A prompt is tokenized as its system turn plus the rest (so token boundaries stay stable across
rounds); with prefix reuse, the KV cache of its longest prefix already computed (a stored prompt
from ``prefix_cache.PrefixStore``, or at least the system turn, computed once and kept) is
loaded and only the new tokens are run. With chained ids (trainers, ``chains.Chains``), a chat
that continues one the backend answered starts from the exact ids given and sampled before.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from stratagem.backends.base import Chat
from stratagem.backends.chains import Chains
from stratagem.backends.prefix_cache import Layers, PrefixStore


@dataclass
class Encoded:
    """A batch of prompts ready for the model."""

    input_ids: Any  # (B, P + W): [prefix][padding][rest] or left-padded whole prompts
    attention_mask: Any  # (B, P + W)
    cache: Any  # a DynamicCache of the rows' reused prefixes (P tokens each), or None
    prefix_len: int  # P
    prompt_tokens: list[int]
    prefill_tokens: list[int]  # the tokens actually computed per row
    rows: list[list[int]]  # each row's prompt ids, unpadded
    prompts: list[str]  # the rendered prompt text of each row


class ChatTokens:
    """Rendering and tokenizing chats as the hf backend does (the llama.cpp engine shares it,
    so both give a chat the same prompt ids).

    A base class: the backend sets ``tokenizer`` and ``_chains``.
    """

    tokenizer: Any
    _chains: Chains | None  # token-level chat continuation (trainers only)

    def render(self, chat: Chat) -> str:
        """Returns the prompt text of ``chat``: the chat template with the generation prompt."""
        text: str = self.tokenizer.apply_chat_template(
            list(chat), tokenize=False, add_generation_prompt=True
        )
        return text

    def _system_head(self, chat: Chat) -> str:
        """The rendered system turn when the prompt starts with it, else ''."""
        if not chat or chat[0].get("role") != "system":
            return ""
        head: str = self.tokenizer.apply_chat_template([dict(chat[0])], tokenize=False)
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
        ids: list[int] = self.tokenizer(head, add_special_tokens=False).input_ids if head else []
        if self._chains is not None:
            before = self._chains.continued(chat, prompt, self.render)
            if before is not None:
                known, text = before
                rest = self.tokenizer(prompt[len(text) :], add_special_tokens=False).input_ids
                return known + rest, len(ids)
        rest = self.tokenizer(prompt[len(head) :], add_special_tokens=False).input_ids
        return ids + rest, len(ids)


class PromptEncoder(ChatTokens):
    """The prompt side of ``HFBackend``: rendering, tokenizing, and prefix KV reuse.

    A base class: the backend sets these attributes when it loads (or wraps) a model.
    """

    model: Any
    device: Any
    dtype: Any
    prefix_reuse: bool
    store: PrefixStore
    _heads: dict[tuple[int, ...], Layers]  # the system turns' KV, by their token ids

    def _lookup(self, row: list[int], head_len: int) -> tuple[int, Layers | None]:
        """The longest reusable prefix of ``row``: a stored prompt, or at least the system turn
        (computed once and kept, so every first round of an episode reuses it)."""
        n, layers = self.store.longest(row)
        if n >= head_len or head_len == 0:
            return n, layers
        key = tuple(row[:head_len])
        if key not in self._heads:
            import torch

            with torch.inference_mode():
                out = self.model(torch.tensor([list(key)], device=self.device), use_cache=True)
            cache = getattr(out, cache_name())
            self._heads[key] = [(layer.keys[0], layer.values[0]) for layer in cache.layers]
        return head_len, self._heads[key]

    def _encode(self, chats: Sequence[Chat]) -> Encoded:
        """Token ids and, with prefix reuse, the cached KV of each row's longest known prefix.

        Rows are laid out ``[left padding][cached prefix][middle padding][new tokens]``: the
        attention mask hides both paddings and position ids follow the mask, so only the new
        tokens are computed. Without reuse rows are plainly left-padded.
        """
        import torch

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
        return Encoded(
            input_ids=torch.tensor(ids, device=self.device),
            attention_mask=torch.tensor(mask, device=self.device),
            cache=cache,
            prefix_len=reused,
            prompt_tokens=[len(r) for r in rows],
            prefill_tokens=[len(x) for x in rests],
            rows=rows,
            prompts=prompts,
        )

    def _batch_cache(self, hits: list[tuple[int, Layers | None]], reused: int) -> Any:
        """A DynamicCache of the rows' reused prefixes, left-padded to ``reused`` tokens."""
        import torch
        from transformers import DynamicCache

        n_layers = self.model.config.num_hidden_layers
        layers = []
        for layer in range(n_layers):
            keys, values = [], []
            for n, stored in hits:
                k, v = stored[layer] if stored is not None else self._empty_kv()
                k, v = k[:, :n], v[:, :n]
                gap = reused - n
                if gap:
                    k = torch.nn.functional.pad(k, (0, 0, gap, 0))
                    v = torch.nn.functional.pad(v, (0, 0, gap, 0))
                keys.append(k)
                values.append(v)
            layers.append((torch.stack(keys), torch.stack(values)))
        return DynamicCache(layers, config=self.model.config)

    def _empty_kv(self) -> tuple[Any, Any]:
        """Keys and values of no tokens, (heads, 0, head_dim): a row with nothing reused."""
        import torch

        cfg = self.model.config
        heads = getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        empty = torch.zeros(heads, 0, head_dim, dtype=self.dtype, device=self.device)
        return empty, empty

    def _remember(self, enc: Encoded, cache: Any) -> None:
        """Store each row's prompt KV (taken from the cache generate filled) for later turns."""
        if not self.prefix_reuse:
            return
        import torch

        width = enc.input_ids.shape[1]
        for i, row in enumerate(enc.rows):
            idx = torch.nonzero(enc.attention_mask[i, :width]).squeeze(1)
            layers = [
                (layer.keys[i][:, idx].clone(), layer.values[i][:, idx].clone())
                for layer in cache.layers
            ]
            self.store.add(row, layers)


@functools.cache
def cache_name() -> str:
    """The name transformers gives the KV cache in model calls and outputs: ``cache`` in
    current releases, ``past_key_values`` in early 5.x ones (where ``cache`` does not exist;
    later ones still take the old name but warn that it is deprecated)."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    names = {f.name for f in fields(CausalLMOutputWithPast)}
    return "cache" if "cache" in names else "past_key_values"
