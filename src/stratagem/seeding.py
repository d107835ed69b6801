"""Seeds by derivation: every episode, seat and decision gets its own stable seed.

Nothing in stratagem touches the global RNG. A seed is derived from a parent seed and keys with
blake2b, so it is stable across processes and Python versions (unlike ``hash()``).
"""

from __future__ import annotations

import hashlib
import random


def derive(seed: int, *keys: object) -> int:
    """Return a 63-bit seed that depends only on ``seed`` and the ``repr`` of ``keys``."""
    text = "\x1f".join([str(int(seed)), *(repr(k) for k in keys)])
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def rng(seed: int, *keys: object) -> random.Random:
    """A fresh ``random.Random`` seeded by ``derive(seed, *keys)``."""
    return random.Random(derive(seed, *keys))
