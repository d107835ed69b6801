"""A persistent response cache: SQLite in WAL mode, JSON values (never pickle), and
``CachedBackend``, any backend behind it.

The key is a sha256 over everything that changes a response (backend kind, model, base URL,
messages, generation parameters, the per-decision seed — so sampled repeats never collapse) and
nothing that does not (concurrency, timeouts, retries). Only complete successes are stored. A
corrupt entry is a miss with a warning; concurrent writers are serialised by SQLite.

``CachedBackend`` is how dialogue trees call their model: its first answer to a (model, chat,
sampling, seed) is the answer from then on, so a rerun, a second solver or a PSRO cell that shares
a prefix costs no model call and sees the same text, and it counts what reached the backend.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stratagem.backends.base import Backend, Chat, Generation, Sampling, StopCheck


def cache_key(**parts: Any) -> str:
    """A sha256 hex digest of ``parts`` as canonical JSON: equal parts, equal key."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class ResponseCache:
    """JSON objects by key in one SQLite file, safe across threads and processes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=60, check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses "
            "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
        )

    def get(self, key: str) -> dict[str, Any] | None:
        """The object stored under ``key``, or ``None`` for a miss or a corrupt entry (which
        also warns)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
            if not isinstance(value, dict):
                raise ValueError("not an object")
            return value
        except (ValueError, TypeError) as exc:
            warnings.warn(
                f"response cache {self.path}: corrupt entry {key[:12]}… ({exc}); "
                "asking the backend again",
                stacklevel=2,
            )
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key`` in one transaction, replacing any older entry. Raises
        ``ValueError`` for a value that is not strict JSON (NaN, infinity)."""
        text = json.dumps(value, ensure_ascii=True, allow_nan=False)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?)", (key, text, time.time())
            )
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close the database; the cache is unusable after."""
        with self._lock:
            self._db.close()


@dataclass
class Usage:
    """What a ``CachedBackend`` has done: backend calls, completions, cache hits, seconds."""

    calls: int = 0  # generate / choice_probs calls that reached the backend
    generated: int = 0  # completions (or distributions) the backend computed
    hits: int = 0  # answers served from the cache
    tokens: int = 0  # tokens the backend generated
    seconds: float = 0.0  # time spent inside backend calls
    batches: list[int] = field(default_factory=list)  # size of each backend call

    def snapshot(self) -> Usage:
        """A copy (to subtract later)."""
        return Usage(
            self.calls, self.generated, self.hits, self.tokens, self.seconds, list(self.batches)
        )

    def since(self, before: Usage) -> Usage:
        """The usage accrued after ``before``."""
        return Usage(
            self.calls - before.calls,
            self.generated - before.generated,
            self.hits - before.hits,
            self.tokens - before.tokens,
            self.seconds - before.seconds,
            self.batches[len(before.batches) :],
        )


class CachedBackend:
    """Any backend behind a persistent response cache (``backends.cache.ResponseCache``).

    The key is (model id, chat, sampling, seed, stop rule); with greedy sampling the seed is left
    out, since it cannot change the text. Misses are deduplicated and sent in one backend call;
    a call whose answers are all cached never reaches the backend.

    Args:
        backend: Any ``Backend`` (hf, openai, scripted).
        cache: A ``ResponseCache``, a path to one, or None to keep answers in memory only.
    """

    def __init__(self, backend: Backend, cache: ResponseCache | str | Path | None = None) -> None:
        self.backend = backend
        self.model_id = backend.model_id
        self.cache = ResponseCache(cache) if isinstance(cache, str | Path) else cache
        self.memory: dict[str, dict[str, Any]] = {}
        self.usage = Usage()

    def _get(self, key: str) -> dict[str, Any] | None:
        hit = self.memory.get(key)
        if hit is None and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.memory[key] = hit
        return hit

    def _put(self, key: str, value: dict[str, Any]) -> None:
        self.memory[key] = value
        if self.cache is not None:
            self.cache.put(key, value)

    def generate(
        self,
        chats: Sequence[Chat],
        sampling: Sampling,
        *,
        seeds: Sequence[int] | None = None,
        stop: Sequence[StopCheck | None] | None = None,
        stop_key: str = "",
    ) -> list[Generation]:
        """Returns one completion per chat, from the cache where possible, the rest from one
        backend call. ``stop_key`` names the stop rule (it changes where text ends)."""
        seeds = list(seeds) if seeds is not None else [0] * len(chats)
        keys = [
            cache_key(
                kind="generate",
                model=self.model_id,
                chat=[dict(m) for m in chat],
                sampling=asdict(sampling),
                seed=None if sampling.greedy else int(seed),
                stop=stop_key,
            )
            for chat, seed in zip(chats, seeds, strict=True)
        ]
        missing: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key not in missing and self._get(key) is None:
                missing[key] = i
        self.usage.hits += len(keys) - sum(1 for k in keys if k in missing)
        if missing:
            idx = list(missing.values())
            start = time.perf_counter()
            gens = self.backend.generate(
                [chats[i] for i in idx],
                sampling,
                seeds=[seeds[i] for i in idx],
                stop=[stop[i] for i in idx] if stop is not None else None,
            )
            self.usage.seconds += time.perf_counter() - start
            self.usage.calls += 1
            self.usage.batches.append(len(idx))
            self.usage.generated += len(idx)
            for key, gen in zip(missing, gens, strict=True):
                self.usage.tokens += gen.tokens
                self._put(
                    key, {"text": gen.text, "tokens": gen.tokens, "finish": gen.finish_reason}
                )
        out = []
        for key in keys:
            hit = self.memory[key]
            out.append(
                Generation(text=hit["text"], tokens=hit["tokens"], finish_reason=hit["finish"])
            )
        return out

    def choice_probs(
        self, chats: Sequence[Chat], choices: Sequence[tuple[str, ...]]
    ) -> list[dict[str, float]]:
        """Returns the backend's constrained distribution over each chat's choices (cached)."""
        keys = [
            cache_key(kind="choices", model=self.model_id, chat=[dict(m) for m in c], choices=cs)
            for c, cs in zip(chats, choices, strict=True)
        ]
        missing = {k: i for i, k in enumerate(keys) if self._get(k) is None}
        self.usage.hits += len(keys) - len(missing)
        if missing:
            idx = list(missing.values())
            start = time.perf_counter()
            probs = self.backend.choice_probs([chats[i] for i in idx], [choices[i] for i in idx])
            self.usage.seconds += time.perf_counter() - start
            self.usage.calls += 1
            self.usage.batches.append(len(idx))
            self.usage.generated += len(idx)
            for key, p in zip(missing, probs, strict=True):
                self._put(key, {"probs": {k: float(v) for k, v in p.items()}})
        return [dict(self.memory[k]["probs"]) for k in keys]
