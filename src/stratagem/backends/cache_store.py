"""Kept for one release: this module moved to ``stratagem.backends.cache.store``."""

from stratagem.backends.cache.store import *  # noqa: F403
