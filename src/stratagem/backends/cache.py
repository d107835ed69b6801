"""A persistent response cache: SQLite in WAL mode, JSON values (never pickle).

The key is a sha256 over everything that changes a response (backend kind, model, base URL,
messages, generation parameters, the per-decision seed — so sampled repeats never collapse) and
nothing that does not (concurrency, timeouts, retries). Only complete successes are stored. A
corrupt entry is a miss with a warning; concurrent writers are serialised by SQLite.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any


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
