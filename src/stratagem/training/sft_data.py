"""Kept for one release: this module moved to ``stratagem.training.sft.data``."""

from stratagem.training.sft.data import *  # noqa: F403
