"""Hand freed heap memory back to the operating system between a trainer's phases.

A phase of games frees most of what it allocated (KV caches, logits, prompt tensors), but glibc
keeps freed chunks in its arenas: after 16 Deal or No Deal self-play games on the embedded model
a process held 3.2 GiB of which 0.9 GiB stayed once trimmed, and a 64-game phase left about
10 GiB held before its fine-tuning allocated on top (enough for the kernel to kill two runs
side by side on 24 GiB).
``malloc_trim(0)`` returns the free pages of every arena; it takes milliseconds, against the
minutes a phase of games takes. Elsewhere than glibc (macOS, musl) there is no such call and
``release_memory`` only collects garbage. ``benchmarks/selfplay_memory.py`` measures the effect.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim`` (glibc), or None where it has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_memory() -> bool:
    """Collect garbage, then give the heap's free pages back to the system; returns whether
    the C library could (False: garbage collected only)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
