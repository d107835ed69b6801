"""The response cache's file: JSON objects by key in one SQLite file (WAL mode, never pickle),
opened defensively so that the cache can only ever make a run cheaper, never break it
(RELIABILITY C4).

- **Unreadable file** (not a database, corrupt, truncated, a folder where the file should be):
  one ``CacheWarning``, the file is moved aside to ``<name>.corrupt-<time>`` (the warning says
  where), and the cache is off for the rest of the process: every ``get`` is a miss, every
  ``put`` is dropped. The next process starts a fresh file. A truncated file is caught on
  opening (its header names more pages than it holds); damage deeper in the file is caught by
  the first statement that reads it.
- **Locked by another process**: each statement waits up to ``wait`` seconds
  (``$STRATAGEM_CACHE_WAIT``, default ``LOCK_WAIT_SECONDS``); past that, one ``CacheWarning``
  and the cache is off the same way, the file left as it is. Answers are still returned to the
  caller, just not stored: a locked cache never turns a good answer into an error, and nothing
  waits on it without bound (so the process never hangs at exit either).
- **Any other failure** (a read-only or full disk, no permission): one warning, the cache off.

A corrupt *entry* in a readable file is a miss with a warning (the file stays in use).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

LOCK_WAIT_SECONDS = 15.0  # how long one statement waits for a cache another process holds
WAIT_ENV = "STRATAGEM_CACHE_WAIT"
_MAGIC = b"SQLite format 3\x00"
_UNREADABLE = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR_SHORT_READ")
_LOCKED = ("SQLITE_BUSY", "SQLITE_LOCKED")
T = TypeVar("T")


class CacheWarning(UserWarning):
    """The response cache cannot be used; the run goes on without it."""


class _Unreadable(Exception):
    """The cache path holds something that is not a readable cache file."""


def lock_wait() -> float:
    """Seconds a statement waits for a locked cache: ``$STRATAGEM_CACHE_WAIT`` when it is a
    non-negative number, else ``LOCK_WAIT_SECONDS``."""
    try:
        seconds = float(os.environ.get(WAIT_ENV, LOCK_WAIT_SECONDS))
    except ValueError:
        return LOCK_WAIT_SECONDS
    return seconds if 0 <= seconds < float("inf") else LOCK_WAIT_SECONDS


def check_header(path: Path) -> None:
    """Raise ``_Unreadable`` when ``path`` is a folder, or a non-empty file that is not an SQLite
    database or holds fewer pages than its header names (truncated)."""
    if path.is_dir():
        raise _Unreadable("a folder, not a cache file")
    try:
        with path.open("rb") as f:
            head = f.read(100)
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return  # a new cache
    if not head:
        return
    if len(head) < 100 or not head.startswith(_MAGIC):
        raise _Unreadable("not an SQLite database")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    # the page count is trusted only when written by the same change as the header (SQLite's rule)
    if head[24:28] == head[92:96] and size < pages * page:
        raise _Unreadable(f"truncated: {size} bytes where the header names {pages * page}")


class ResponseCache:
    """JSON objects by key in one SQLite file, safe across threads and processes; opened
    defensively (module docstring): it never raises for a bad or busy file, it turns itself off.

    Args:
        path: the SQLite file (created with its folder when missing).
        wait: seconds one statement waits for a lock another process holds (default
            ``lock_wait()``).

    Attributes:
        off: why the cache is off (``None`` while it works).
    """

    def __init__(self, path: str | Path, *, wait: float | None = None):
        self.path = Path(path)
        self.wait = lock_wait() if wait is None else wait
        self.off: str | None = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._inode: tuple[int, int] | None = None
        with self._lock:
            self._guard(self._open)

    def _open(self) -> None:
        check_header(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            self.path, timeout=self.wait, check_same_thread=False, isolation_level=None
        )
        stat = self.path.stat()
        self._inode = (stat.st_dev, stat.st_ino)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses "
            "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
        )

    def _guard(self, step: Callable[[], T]) -> T | None:
        """Run ``step`` (with ``_lock`` held) unless the cache is off; a failure turns it off
        with one warning and gives None."""
        if self.off is not None:
            return None
        try:
            return step()
        except (sqlite3.Error, OSError, _Unreadable) as exc:
            self._turn_off(exc)
            return None

    def _turn_off(self, exc: BaseException) -> None:
        name = getattr(exc, "sqlite_errorname", "") or ""
        reason = " ".join(str(exc).split()) or type(exc).__name__
        self._close_db()
        if isinstance(exc, _Unreadable) or name.startswith(_UNREADABLE):
            self.off = f"unreadable ({reason}); {self._move_aside()}"
        elif name.startswith(_LOCKED):
            self.off = f"locked by another process (waited {self.wait:g} s; the file is left as is)"
        else:
            self.off = f"unusable ({reason})"
        warnings.warn(
            f"response cache {self.path} is {self.off}; this run goes on without a cache",
            CacheWarning,
            stacklevel=4,
        )

    def _move_aside(self) -> str:
        """Rename the unreadable file (and its WAL sidecars) out of the way; says where."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            stat = self.path.stat()
            if self._inode is not None and self._inode != (stat.st_dev, stat.st_ino):
                return "another process replaced it already"  # not ours to move
            os.replace(self.path, aside)
        except OSError as exc:
            return f"could not move it aside ({exc.strerror or exc})"
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
        return f"moved to {aside} (the next run starts a fresh cache)"

    def _close_db(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def get(self, key: str) -> dict[str, Any] | None:
        """The object stored under ``key``, or ``None`` for a miss, a corrupt entry (which also
        warns) or a cache that is off."""

        def read() -> Any:
            assert self._db is not None
            return self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()

        with self._lock:
            row = self._guard(read)
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
        """Store ``value`` under ``key`` in one transaction, replacing any older entry (dropped
        when the cache is off). Raises ``ValueError`` for a value that is not strict JSON (NaN,
        infinity)."""
        text = json.dumps(value, ensure_ascii=True, allow_nan=False)

        def write() -> None:
            assert self._db is not None
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO responses VALUES (?, ?, ?)", (key, text, time.time())
                )
                self._db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise

        with self._lock:
            self._guard(write)

    def __len__(self) -> int:
        def count() -> int:
            assert self._db is not None
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

        with self._lock:
            return self._guard(count) or 0

    def close(self) -> None:
        """Close the database; the cache is unusable after."""
        with self._lock:
            self._close_db()
            self.off = self.off or "closed"
