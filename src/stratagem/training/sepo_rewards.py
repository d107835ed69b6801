"""Kept for one release: this module moved to ``stratagem.training.sepo.rewards``."""

from stratagem.training.sepo.rewards import *  # noqa: F403
