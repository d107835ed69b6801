"""Kept for one release: this module moved to ``stratagem.training.bargaining.trainer``."""

from stratagem.training.bargaining.trainer import *  # noqa: F403
