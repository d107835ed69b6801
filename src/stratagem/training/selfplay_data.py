"""Kept for one release: this module moved to ``stratagem.training.selfplay.data``."""

from stratagem.training.selfplay.data import *  # noqa: F403
