"""Kept for one release: this module moved to ``stratagem.training.selfplay.args``."""

from stratagem.training.selfplay.args import *  # noqa: F403
