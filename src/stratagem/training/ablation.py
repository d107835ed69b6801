"""Kept for one release: this module moved to ``stratagem.training.sepo.ablation``."""

from stratagem.training.sepo.ablation import *  # noqa: F403
