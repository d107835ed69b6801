"""A persistent response cache: SQLite in WAL mode, JSON values (never pickle), and
``CachedBackend``, any backend behind it.

The key is a sha256 over everything that changes a response (backend kind, model, base URL,
messages, generation parameters, the per-decision seed — so sampled repeats never collapse) and
nothing that does not (concurrency, timeouts, retries). Only complete successes are stored. The
file itself (``cache.store.ResponseCache``) is opened defensively: a corrupt entry is a miss with
a warning, an unreadable or locked file turns the cache off with one warning, and concurrent
writers are serialised by SQLite.

``CachedBackend`` is how dialogue trees call their model: its first answer to a (model, chat,
sampling, seed) is the answer from then on, so a rerun, a second solver or a PSRO cell that shares
a prefix costs no model call and sees the same text, and it counts what reached the backend. A
failed generation (finish reason ``error`` or ``empty``: a dead endpoint, a server error, null
content) is returned to the caller as the failure it is and never stored, so a rerun asks again.

The model in the key is the backend's ``fingerprint`` where it has one (a content hash of the
weights, adapter and dtype of a local model: ``weights_fingerprint``), else its ``model_id``: a
model retrained at the same path is a different model and misses the cache (RELIABILITY C1).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stratagem.backends.base import Backend, Chat, Generation, Sampling, StopCheck
from stratagem.backends.cache.store import CacheWarning, ResponseCache

__all__ = [
    "CacheWarning",
    "CachedBackend",
    "ResponseCache",
    "Usage",
    "cache_key",
    "failed",
    "failure_text",
    "weights_fingerprint",
]

FAILED = ("error", "empty")  # finish reasons of a generation that is not an answer
STORED = ("stop", "length", "action")  # finish reasons of a complete answer, the only ones kept
WEIGHT_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".gguf",
    ".json",
    ".model",
    ".jinja",
    ".txt",
)


def failed(gen: Generation) -> bool:
    """Whether ``gen`` is a failed generation (no answer) rather than a message."""
    return gen.finish_reason in FAILED


def failure_text(gen: Generation) -> str:
    """A one-line reason for a failed generation (the backend's error, else its finish)."""
    error = gen.info.get("error") or gen.info.get("malformed") or gen.finish_reason
    return " ".join(str(error).split())[:200]


_DIGESTS: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


def _file_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def weights_fingerprint(
    model: str | Path, adapters: Sequence[str | Path] = (), dtype: str = ""
) -> str:
    """A content hash of a local model: every weights, config and tokenizer file (by suffix,
    ``WEIGHT_SUFFIXES``) of ``model`` and of each adapter folder, and the dtype. A hub id that
    is not a local folder contributes its name only (its revision is the caller's to add).

    Reads every file once per process (sha256; memoised by path, size and modification time).
    """
    h = hashlib.sha256(f"dtype={dtype}".encode())
    for root in (model, *adapters):
        folder = Path(root)
        if not folder.is_dir():
            h.update(f"\x00name={root}".encode())
            continue
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            if path.name.endswith(WEIGHT_SUFFIXES):
                rel = path.relative_to(folder).as_posix()
                h.update(f"\x00{rel}={_file_digest(path)}".encode())
    return h.hexdigest()[:32]


def cache_key(**parts: Any) -> str:
    """A sha256 hex digest of ``parts`` as canonical JSON: equal parts, equal key."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Usage:
    """What a ``CachedBackend`` has done: backend calls, completions, cache hits, seconds."""

    calls: int = 0  # generate / choice_probs calls that reached the backend
    generated: int = 0  # completions (or distributions) the backend computed
    hits: int = 0  # answers served from the cache
    tokens: int = 0  # tokens the backend generated
    seconds: float = 0.0  # time spent inside backend calls
    batches: list[int] = field(default_factory=list)  # size of each backend call
    failed: int = 0  # generations that failed (returned as failures, never stored)

    def snapshot(self) -> Usage:
        """A copy (to subtract later)."""
        return Usage(
            self.calls,
            self.generated,
            self.hits,
            self.tokens,
            self.seconds,
            list(self.batches),
            self.failed,
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
            self.failed - before.failed,
        )


class CachedBackend:
    """Any backend behind a persistent response cache (``backends.cache.ResponseCache``).

    The key is (model fingerprint, chat, sampling, seed, stop rule); with greedy sampling the
    seed is left out, since it cannot change the text. Misses are deduplicated and sent in one
    backend call; a call whose answers are all cached never reaches the backend. A failed
    generation (``failed``) is returned as it came and never stored, in memory or on disk.

    Args:
        backend: Any ``Backend`` (hf, openai, scripted).
        cache: A ``ResponseCache``, a path to one, or None to keep answers in memory only.
    """

    def __init__(self, backend: Backend, cache: ResponseCache | str | Path | None = None) -> None:
        self.backend = backend
        self.model_id = backend.model_id
        # what names the exact weights: a content hash where the backend has one (C1)
        self.fingerprint: str = getattr(backend, "fingerprint", None) or backend.model_id
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
                model=self.fingerprint,
                chat=[dict(m) for m in chat],
                sampling=asdict(sampling),
                seed=None if sampling.greedy else int(seed),
                stop=stop_key,
            )
            for chat, seed in zip(chats, seeds, strict=True)
        ]
        missing: dict[str, int] = {}
        fresh: dict[str, Generation] = {}  # answers of this call that are not stored
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
                if failed(gen):
                    self.usage.failed += 1
                    fresh[key] = gen
                elif gen.finish_reason in STORED:
                    self._put(
                        key, {"text": gen.text, "tokens": gen.tokens, "finish": gen.finish_reason}
                    )
                else:  # an answer, but not a complete one (cut by a cap): used, not kept
                    fresh[key] = gen
        out = []
        for key in keys:
            if key in fresh:
                out.append(fresh[key])
                continue
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
            cache_key(kind="choices", model=self.fingerprint, chat=[dict(m) for m in c], choices=cs)
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
