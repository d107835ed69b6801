"""Kept for one release: this module moved to ``stratagem.trace.schema``."""

from stratagem.trace.schema import *  # noqa: F403
