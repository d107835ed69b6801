"""``release_memory``: the heap's free pages go back to the system between a trainer's phases,
and where the C library has no ``malloc_trim`` the call still works (garbage collection only)."""

from __future__ import annotations

import gc
import os
import platform
import types

import pytest

from stratagem.training import memory
from stratagem.training.memory import release_memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_freed_heap_pages_go_back_to_the_system():
    # 160 MB of 4 KB heap blocks, every 64th kept: the survivors pin the heap, so free() cannot
    # shrink it from the top and the freed pages stay resident until they are trimmed
    blocks = [bytes([k % 256]) * 4096 for k in range(40_000)]
    survivors = blocks[::64]
    del blocks
    gc.collect()
    held = resident_bytes()
    assert release_memory() is True
    assert held - resident_bytes() > 100 * 2**20
    assert len(survivors) == 625


def test_without_malloc_trim_only_garbage_is_collected(monkeypatch):
    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(memory.ctypes.util, "find_library", lambda name: None)
    assert release_memory() is False
    memory._malloc_trim.cache_clear()
    # a C library without the function (musl, macOS)
    monkeypatch.setattr(memory.ctypes.util, "find_library", lambda name: "libc.so")
    monkeypatch.setattr(memory.ctypes, "CDLL", lambda name: types.SimpleNamespace())
    assert release_memory() is False
    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(memory.ctypes, "CDLL", _missing_library)
    assert release_memory() is False
    memory._malloc_trim.cache_clear()


def _missing_library(name):
    raise OSError(f"{name}: cannot open shared object file")
