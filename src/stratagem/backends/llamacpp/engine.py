"""llama.cpp in-process (llama-cpp-python's C API): many sequences decoded in one batch, each
keeping its prompt's KV cache between calls, and a LoRA adapter swapped in place.

llama-cpp-python's ``Llama`` class runs one sequence; a trainer's rollouts run dozens of chats at
once, whose prompts share long prefixes (a game's rules) and grow by a turn at a time. So the
engine drives the C API directly: one context with a *unified* KV cache (every sequence draws
from one pool of cells), a row per chat in each ``llama_decode`` call, and ``KVSlots`` deciding
which sequence a new prompt continues (its own earlier turn, in place) or copies its prefix from
(another chat's: ``llama_memory_seq_cp`` shares the cells, nothing is recomputed).

Naive equivalent: one ``Llama`` per chat, every prompt evaluated from scratch;
``tests/backends/test_llamacpp.py`` checks the batched engine's logits against single-sequence
decoding and transformers'.
"""

from __future__ import annotations

import ctypes
import functools
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stratagem.errors import ConfigError, StratagemError

KV_TYPES = {"f32": 0, "f16": 1}  # ggml_type ids of the KV cache
SHARED_MIN = 32  # tokens of a batch-shared prefix worth computing once and copying


def llamacpp_unavailable() -> str | None:
    """Why the llama.cpp engine cannot run here (llama-cpp-python missing), or None."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed: pip install 'stratagem[server]'"
    return None


@functools.cache
def _lib() -> Any:
    """The llama_cpp module, its backend initialised once and its log kept quiet."""
    import llama_cpp

    @llama_cpp.llama_log_callback
    def quiet(level: int, text: bytes, user_data: Any) -> None:
        return None

    _lib.keep = quiet  # type: ignore[attr-defined]  # the callback must outlive every call
    llama_cpp.llama_log_set(quiet, ctypes.c_void_p())
    llama_cpp.llama_backend_init()
    return llama_cpp


class CacheFull(StratagemError):
    """A batch's prompts and the tokens they may generate do not fit in the KV cache."""


@dataclass(frozen=True)
class Placement:
    """Where a row's prompt goes: sequence ``seq``, whose first ``start`` tokens already hold
    the row's prefix (computed before, or copied from ``source``)."""

    seq: int
    start: int
    source: int | None = None  # the sequence the prefix is copied from (None: in place)


class KVSlots:
    """Which token ids each sequence of a unified KV cache holds, and the cells they use.

    ``place`` puts a batch of prompts: a row continues the sequence that holds exactly a prefix
    of it (its seat's last turn) in place, else copies its longest common prefix with any
    sequence into a free one (or the least recently used), evicting sequences while the batch's
    new tokens would not fit in ``n_cells``. Cells are counted as llama.cpp's unified cache
    holds them: a copied prefix shares its cells, a cell is free once no sequence holds it.

    Naive equivalent: a fresh sequence per prompt, computed from its first token.
    """

    def __init__(self, n_seq: int, n_cells: int):
        self.n_seq = n_seq
        self.n_cells = n_cells
        self.tokens: dict[int, list[int]] = {}  # seq -> the ids its cells hold, by position
        self._cells: dict[int, list[int]] = {}  # seq -> the cell of each position
        self._refs: Counter[int] = Counter()  # cell -> sequences holding it
        self._lru: OrderedDict[int, None] = OrderedDict()
        self._next_cell = 0

    @property
    def used(self) -> int:
        """Cells held by at least one sequence."""
        return len(self._refs)

    def place(
        self, rows: Sequence[list[int]], keep: Sequence[int], reserve: int
    ) -> tuple[list[Placement], list[int]]:
        """Places ``rows``; returns each row's placement and the sequences to clear first.

        Args:
            rows: each row's token ids.
            keep: per row, the first position whose logits are wanted (its prefix up to there
                may be reused; at least one token of every row is computed).
            reserve: cells to keep free per row for the tokens it will generate.

        Raises:
            CacheFull: the rows do not fit even with every other sequence evicted (the
                bookkeeping is then left half-updated: ``clear`` the engine).
        """
        snapshot = {s: list(t) for s, t in self.tokens.items()}
        claimed: set[int] = set()  # continued in place, or a copy source, in this batch
        plans: list[tuple[int | None, int, bool]] = []  # (source, shared, in place)
        for row, k in zip(rows, keep, strict=True):
            source, shared = self._longest(snapshot, row, min(k, len(row) - 1))
            own = source is not None and source not in claimed
            in_place = own and shared == len(snapshot[source])  # type: ignore[index]
            if source is not None:
                claimed.add(source)
            plans.append((source, shared, in_place))
        evicted: list[int] = []
        placements = []
        for source, shared, in_place in plans:
            if in_place and source is not None:
                placements.append(Placement(source, shared))
                continue
            seq = self._free_seq(claimed, evicted)
            claimed.add(seq)
            placements.append(Placement(seq, shared, source if shared else None))
        for p in placements:  # copies share the source's cells
            if p.source is not None:
                self._drop(p.seq)
                self._cells[p.seq] = self._cells[p.source][: p.start]
                self._refs.update(self._cells[p.seq])
            self.tokens[p.seq] = (
                snapshot[p.source][: p.start]
                if p.source is not None
                else self.tokens.get(p.seq, [])[: p.start]
            )
            self._cells.setdefault(p.seq, [])
            self._lru[p.seq] = None
            self._lru.move_to_end(p.seq)
        needed = sum(len(r) - p.start + reserve for r, p in zip(rows, placements, strict=True))
        while self.used + needed > self.n_cells:
            victim = next((s for s in self._lru if s not in claimed), None)
            if victim is None:
                raise CacheFull(
                    f"llama.cpp KV cache too small: {needed} new tokens in one batch, "
                    f"{self.n_cells} cells (raise n_ctx)"
                )
            self._drop(victim)
            evicted.append(victim)
        return placements, evicted

    def extend(self, seq: int, ids: Sequence[int]) -> None:
        """Record that ``ids`` were decoded into ``seq`` after the tokens it holds."""
        self.tokens[seq].extend(ids)
        new = list(range(self._next_cell, self._next_cell + len(ids)))
        self._next_cell += len(ids)
        self._cells[seq].extend(new)
        self._refs.update(new)

    def clear(self) -> None:
        """Forget every sequence (after the engine's cache is cleared)."""
        self.tokens.clear()
        self._cells.clear()
        self._refs.clear()
        self._lru.clear()

    def _longest(
        self, snapshot: dict[int, list[int]], row: list[int], limit: int
    ) -> tuple[int | None, int]:
        best, best_seq = 0, None
        query = np.asarray(row[:limit])
        for seq, held in snapshot.items():
            n = min(len(held), limit)
            if n <= best:
                continue
            diff = np.flatnonzero(np.asarray(held[:n]) != query[:n])
            common = int(diff[0]) if len(diff) else n
            if common > best:
                best, best_seq = common, seq
        return best_seq, best

    def _free_seq(self, claimed: set[int], evicted: list[int]) -> int:
        for seq in range(self.n_seq):
            if seq not in self.tokens and seq not in claimed:
                return seq
        victim = next((s for s in self._lru if s not in claimed), None)
        if victim is None:
            raise StratagemError(f"more rows than llama.cpp sequences ({self.n_seq}) in a batch")
        self._drop(victim)
        evicted.append(victim)
        return victim

    def _drop(self, seq: int) -> None:
        for cell in self._cells.pop(seq, []):
            self._refs[cell] -= 1
            if not self._refs[cell]:
                del self._refs[cell]
        self.tokens.pop(seq, None)
        self._lru.pop(seq, None)


class LlamaCppEngine:
    """A GGUF model in one llama.cpp context: batched decoding over ``KVSlots``, an optional
    LoRA adapter.

    Args:
        path: the GGUF model file.
        n_ctx: cells of the unified KV cache (all sequences together).
        n_seq: sequences the cache keeps (a batch's rows plus earlier chats kept for reuse).
        n_batch: tokens per ``llama_decode`` call at most.
        threads: CPU threads (results do not depend on them).
        kv_dtype: the KV cache's type (``f16``, llama.cpp's default, or ``f32``).
        flash_attn: llama.cpp's fused attention (None: its choice, on for the CPU), which
            computes attention in f16 whatever ``kv_dtype``: on SmolLM2 in f32, log-probs
            within 0.06 of transformers' over the whole vocabulary; off with an f32 cache,
            within 1e-4 at about half the speed (measured: docs/benchmarks.md).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        n_ctx: int = 16384,
        n_seq: int = 256,
        n_batch: int = 2048,
        threads: int = 2,
        kv_dtype: str = "f16",
        flash_attn: bool | None = None,
    ):
        lib = _lib()
        if kv_dtype not in KV_TYPES:
            raise ConfigError(f"kv_dtype must be one of {', '.join(KV_TYPES)}, not {kv_dtype}")
        self.model = lib.llama_model_load_from_file(
            str(path).encode(), lib.llama_model_default_params()
        )
        if not self.model:
            raise StratagemError(f"llama.cpp could not load {path}")
        params = lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = min(n_batch, 512)
        params.n_seq_max = n_seq
        params.n_threads = params.n_threads_batch = threads
        params.kv_unified = True
        params.no_perf = True
        params.type_k = params.type_v = KV_TYPES[kv_dtype]
        params.flash_attn_type = {None: -1, False: 0, True: 1}[flash_attn]
        self.ctx = lib.llama_init_from_model(self.model, params)
        if not self.ctx:
            raise StratagemError(f"llama.cpp could not create a context for {path}")
        self.memory = lib.llama_get_memory(self.ctx)
        self.n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self.model))
        self.n_batch = n_batch
        self.batch = lib.llama_batch_init(n_batch, 0, 1)
        self.slots = KVSlots(n_seq, n_ctx)
        self.adapter: Any = None

    def close(self) -> None:
        """Free the context, the adapter and the model."""
        lib = _lib()
        if self.ctx:
            lib.llama_batch_free(self.batch)
            lib.llama_free(self.ctx)
            if self.adapter:
                lib.llama_adapter_lora_free(self.adapter)
            lib.llama_model_free(self.model)
            self.ctx = self.model = self.adapter = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    def set_threads(self, threads: int) -> None:
        """Decode with ``threads`` CPU threads from the next call on (results do not change)."""
        _lib().llama_set_n_threads(self.ctx, threads, threads)

    def set_lora(self, path: str | Path | None) -> None:
        """Apply the GGUF LoRA adapter at ``path`` (scale 1) from the next decode on, or none;
        the previous adapter is freed and every cached sequence forgotten."""
        lib = _lib()
        adapter = None
        if path is not None:
            adapter = lib.llama_adapter_lora_init(self.model, str(path).encode())
            if not adapter:
                raise StratagemError(f"llama.cpp could not load the LoRA adapter {path}")
            adapters = (lib.llama_adapter_lora_p_ctypes * 1)(adapter)
            scales = (ctypes.c_float * 1)(1.0)
            lib.llama_set_adapters_lora(self.ctx, adapters, 1, scales)
        else:
            lib.llama_set_adapters_lora(self.ctx, None, 0, None)
        if self.adapter:
            lib.llama_adapter_lora_free(self.adapter)
        self.adapter = adapter
        self.clear()

    def clear(self) -> None:
        """Forget every cached sequence."""
        _lib().llama_memory_clear(self.memory, True)
        self.slots.clear()

    def prefill(
        self, rows: Sequence[list[int]], keep: Sequence[int], reserve: int = 0
    ) -> tuple[list[Placement], list[np.ndarray]]:
        """Computes each row's tokens not already cached; returns the placements and, per row,
        the logits (positions ``keep[i]`` … end, V) of its positions from ``keep[i]`` on."""
        later = self._followers(rows, keep)
        if later:  # rows that share a longer prefix with an earlier row than with the cache
            first = [i for i in range(len(rows)) if i not in later]
            done = self.prefill([rows[i] for i in first], [keep[i] for i in first], reserve)
            rest = self.prefill([rows[i] for i in later], [keep[i] for i in later], reserve)
            placed = dict(zip(first, zip(*done, strict=True), strict=True))
            placed.update(zip(later, zip(*rest, strict=True), strict=True))
            order = [placed[i] for i in range(len(rows))]
            return [p for p, _ in order], [lg for _, lg in order]
        lib = _lib()
        placements, evicted = self.slots.place(rows, keep, reserve)
        for p in placements:  # copy before clearing: a source may have been evicted after
            if p.source is not None:
                lib.llama_memory_seq_rm(self.memory, p.seq, -1, -1)
                lib.llama_memory_seq_cp(self.memory, p.source, p.seq, 0, p.start)
            else:
                lib.llama_memory_seq_rm(self.memory, p.seq, p.start, -1)
        for seq in evicted:
            if seq not in {p.seq for p in placements}:
                lib.llama_memory_seq_rm(self.memory, seq, -1, -1)
        items = []  # (token, position, seq, wants logits)
        for i, (row, p) in enumerate(zip(rows, placements, strict=True)):
            for pos in range(p.start, len(row)):
                items.append((row[pos], pos, p.seq, pos >= keep[i]))
            self.slots.extend(p.seq, row[p.start :])
        logits = self._decode(items)
        out, at = [], 0
        for row, k in zip(rows, keep, strict=True):
            out.append(logits[at : at + len(row) - k])
            at += len(row) - k
        return placements, out

    def _followers(self, rows: Sequence[list[int]], keep: Sequence[int]) -> list[int]:
        """Rows whose longest common prefix with an earlier row of the batch exceeds their
        longest with the cache by ``SHARED_MIN`` tokens: they are computed after the earlier
        rows and copy that prefix (a step's first prompts share the game's rules)."""
        later: list[int] = []
        leaders: list[np.ndarray] = []
        for row, k in zip(rows, keep, strict=True):
            limit = min(k, len(row) - 1)
            query = np.asarray(row[:limit])
            _, cached = self.slots._longest(self.slots.tokens, row, limit)
            shared = 0
            for other in leaders:
                n = min(len(other), limit)
                diff = np.flatnonzero(other[:n] != query[:n])
                shared = max(shared, int(diff[0]) if len(diff) else n)
            if shared >= cached + SHARED_MIN:
                later.append(len(leaders) + len(later))
            else:
                leaders.append(np.asarray(row))
        return later

    def step(self, tokens: Sequence[tuple[int, int, int]]) -> np.ndarray:
        """Decodes one token per sequence: ``(token, position, seq)`` each; returns (B, V)."""
        for token, _, seq in tokens:
            self.slots.extend(seq, [token])
        return self._decode([(t, pos, seq, True) for t, pos, seq in tokens])

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> np.ndarray:
        """Runs ``items`` in calls of at most ``n_batch`` tokens; the logits of the flagged ones,
        in order (N, V)."""
        lib = _lib()
        pieces = []
        batch = self.batch
        for start in range(0, len(items), self.n_batch):
            chunk = items[start : start + self.n_batch]
            batch.n_tokens = len(chunk)
            for i, (token, pos, seq, wanted) in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = pos
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq
                batch.logits[i] = wanted
            code = lib.llama_decode(self.ctx, batch)
            if code != 0:
                raise StratagemError(f"llama.cpp decode failed (code {code})")
            n_out = sum(1 for c in chunk if c[3])
            if n_out:
                ptr = lib.llama_get_logits(self.ctx)
                pieces.append(np.ctypeslib.as_array(ptr, shape=(n_out, self.n_vocab)).copy())
        return np.concatenate(pieces) if pieces else np.zeros((0, self.n_vocab), np.float32)
