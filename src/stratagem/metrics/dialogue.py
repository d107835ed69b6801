"""Kept for one release: this module moved to ``stratagem.solvers.dialogue.metrics``."""

from stratagem.solvers.dialogue.metrics import *  # noqa: F403
