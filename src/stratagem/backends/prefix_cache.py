"""Reusable KV caches of prompts already computed (prefix reuse for prefill-heavy game prompts).

Game prompts are long rules plus a history that grows by a line a round, and the answers are
short, so prefill dominates. The store keeps the KV cache of recent prompts; a new prompt reuses
the KV of its longest common token prefix with any stored prompt (KV at a position depends only on
the tokens up to it, so any prefix of a stored cache is valid). The shared system prompt and the
earlier rounds of the same episode are then computed once, and a decision costs its new tokens.

Naive equivalent: compute every prompt from scratch. ``tests/backends/test_hf.py`` checks both
give the same greedy answers.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

Layers = list[tuple[Any, Any]]  # per layer: keys, values of shape (heads, tokens, head_dim)


class PrefixStore:
    """Least-recently-used KV caches, bounded by entry count and by bytes."""

    def __init__(self, max_entries: int = 128, max_bytes: int = 1 << 30):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[int, ...], tuple[np.ndarray, Layers]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, ids: list[int]) -> tuple[int, Layers | None]:
        """(length, layers) of the longest stored prefix of ``ids`` (at most ``len(ids) - 1``
        tokens, so at least one token is always computed and yields logits)."""
        if not self._entries:
            return 0, None
        query = np.asarray(ids)
        best, best_key = 0, None
        for key, (arr, _) in self._entries.items():
            n = min(len(arr), len(query) - 1)
            if n <= best:
                continue
            diff = np.flatnonzero(arr[:n] != query[:n])
            common = int(diff[0]) if len(diff) else n
            if common > best:
                best, best_key = common, key
        if best_key is None:
            return 0, None
        self._entries.move_to_end(best_key)
        return best, self._entries[best_key][1]

    def add(self, ids: list[int], layers: Layers) -> None:
        """Stores the KV cache ``layers`` of prompt ``ids``, replacing stored prompts it extends.

        Then it evicts the least recently used entries while over ``max_entries`` or ``max_bytes``.
        """
        key = tuple(ids)
        # an entry that is a prefix of the new one is superseded by it
        for old in [k for k in self._entries if len(k) <= len(key) and key[: len(k)] == k]:
            self._drop(old)
        self._entries[key] = (np.asarray(ids), layers)
        self.bytes += _size(layers)
        while self._entries and (
            len(self._entries) > self.max_entries or self.bytes > self.max_bytes
        ):
            self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[int, ...]) -> None:
        _, layers = self._entries.pop(key)
        self.bytes -= _size(layers)

    def clear(self) -> None:
        """Drops every stored cache."""
        self._entries.clear()
        self.bytes = 0


def _size(layers: Layers) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
