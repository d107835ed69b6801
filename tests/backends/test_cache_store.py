"""The response cache's file opened defensively (RELIABILITY C4): a corrupt, truncated or
folder-shaped file is one warning, moved aside, and the run goes on uncached; a file another
process holds locked is waited for with a bound, then the run goes on uncached. Real files, a
real second process holding the lock, a real server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from stratagem.backends.base import Sampling
from stratagem.backends.cache import CacheWarning, ResponseCache
from stratagem.backends.openai import OpenAIBackend
from tests.backends.fault_server import FaultServer

CHAT = [{"role": "system", "content": "rules"}, {"role": "user", "content": "your move"}]
HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "wal":
    db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS responses "
           "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)")
db.execute("BEGIN EXCLUSIVE")
db.execute("INSERT OR REPLACE INTO responses VALUES ('held', '{}', 0)")
print("locked", flush=True)
time.sleep(120)
"""


def answer(cache, server) -> str:
    backend = OpenAIBackend("fake", server.url, cache=cache, attempt_timeout=5)
    try:
        return backend.generate([CHAT], Sampling(), seeds=[1])[0].text
    finally:
        backend.close()


def cache_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, CacheWarning)]


def filled(path: Path, n: int = 3000) -> bytes:
    cache = ResponseCache(path)
    for i in range(n):
        cache.put(f"k{i}", {"text": "x" * 100})
    cache.close()  # the last connection checkpoints the WAL into the file
    return path.read_bytes()


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(5000))


def truncated(path: Path) -> None:
    data = filled(path)
    path.write_bytes(data[: len(data) // 2])


def folder(path: Path) -> None:
    path.mkdir()
    (path / "something.txt").write_text("kept")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (garbage, "not an SQLite database"),
        (truncated, "truncated"),
        (folder, "a folder, not a cache file"),
    ],
)
def test_an_unreadable_cache_is_moved_aside_with_one_warning_and_the_run_goes_on(
    tmp_path, damage, reason
):
    path = tmp_path / "responses.sqlite"
    damage(path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with FaultServer([("ok", "DEFECT")]) as server, warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert answer(path, server) == "DEFECT"
        assert len(server.requests) == 1
    messages = cache_warnings(rec)
    assert len(messages) == 1 and f"{path} is unreadable ({reason}" in messages[0]
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("responses.sqlite.corrupt-")]
    assert len(aside) == 1 and f"moved to {aside[0]} " in messages[0]
    assert before == ["responses.sqlite"] and not path.exists()  # nothing else was touched
    if damage is folder:
        assert (aside[0] / "something.txt").read_text() == "kept"
    # the next run starts a fresh cache and uses it
    with FaultServer([("ok", "DEFECT")]) as server, warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert answer(path, server) == "DEFECT" and answer(path, server) == "DEFECT"
        assert len(server.requests) == 1 and cache_warnings(rec) == []


def test_damage_found_deeper_in_a_file_turns_the_cache_off_on_first_read(tmp_path):
    path = tmp_path / "responses.sqlite"
    data = bytearray(filled(path))
    data[8192:] = os.urandom(len(data) - 8192)  # pages after the second: noise, same length
    path.write_bytes(bytes(data))
    cache = ResponseCache(path)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        found = [cache.get(f"k{i}") for i in range(0, 3000, 100)]
        cache.put("new", {"text": "y"})
    assert all(x is None or x == {"text": "x" * 100} for x in found)
    messages = cache_warnings(rec)
    assert len(messages) == 1 and "is unreadable (" in messages[0] and "moved to" in messages[0]
    assert cache.get("new") is None and len(cache) == 0 and cache.off is not None


@pytest.fixture
def holder(tmp_path, request):
    """A second process holding the cache file locked (``request.param``: ``wal`` or
    ``rollback`` journal)."""
    path = tmp_path / "responses.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), request.param], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    yield path
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize("holder", ["wal", "rollback"], indirect=True)
def test_a_cache_locked_by_another_process_is_waited_for_then_the_run_goes_on(holder):
    with FaultServer([("ok", "DEFECT")]) as server, warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        start = time.monotonic()
        texts = [answer(ResponseCache(holder, wait=0.5), server) for _ in range(2)]
        elapsed = time.monotonic() - start
    assert texts == ["DEFECT", "DEFECT"]  # good answers stay good answers
    messages = cache_warnings(rec)
    assert len(messages) == 2  # one per cache opened
    assert all(f"{holder} is locked by another process (waited 0.5 s" in m for m in messages)
    # two waits of 0.5 s, not of the default 15 s (the bound leaves room for a loaded machine)
    assert elapsed < 15
    assert holder.exists() and not list(holder.parent.glob("*.corrupt-*"))


@pytest.mark.parametrize("holder", ["wal"], indirect=True)
def test_a_locked_cache_never_turns_an_eval_into_errors_nor_hangs_at_exit(tmp_path, holder):
    out = tmp_path / "run"
    env = {**os.environ, "STRATAGEM_CACHE": str(holder.parent), "STRATAGEM_CACHE_WAIT": "1"}
    with FaultServer([("ok", "COOPERATE")]) as server:
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "stratagem.cli.main", "eval", "--game", "ipd", "--agent",
             "openai:m", "--base-url", server.url, "--episodes", "2", "--out", str(out)],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert elapsed < 30
    statuses = {json.loads(line)["status"] for line in (out / "traces.jsonl").open()}
    assert statuses == {"complete"}
    assert done.stderr.count("CacheWarning") == 1 and "is locked by another process" in done.stderr
