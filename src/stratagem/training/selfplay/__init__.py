"""Filtered-BC self-play for Deal or No Deal, seed 002 (``stratagem train selfplay``).

Parts: ``args`` (the settings), ``trainer`` (the iteration loop), ``data`` (which seats are
kept), ``report`` (tables and curves), ``evaluate`` (re-evaluating a run's checkpoints). ``from
stratagem.training.selfplay import train_selfplay, SelfPlayArgs`` loads the trainer (and torch)
on first use only (PEP 562); ``stratagem.training.selfplay.args`` stays light. Other names of
the former single module ``stratagem.training.selfplay`` still resolve, from ``trainer``, for
one release.
"""

from __future__ import annotations

from stratagem.lazy import lazy_names

_EXPORTS = {
    "SelfPlayArgs": "args",
    "train_selfplay": "trainer",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_names(__name__, _EXPORTS, fallback="trainer")
