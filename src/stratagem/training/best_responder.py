"""Kept for one release: this module moved to ``stratagem.training.sepo.best_responder``."""

from stratagem.training.sepo.best_responder import *  # noqa: F403
