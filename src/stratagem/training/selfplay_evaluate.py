"""Kept for one release: this module moved to ``stratagem.training.selfplay.evaluate``."""

from stratagem.training.selfplay.evaluate import *  # noqa: F403
