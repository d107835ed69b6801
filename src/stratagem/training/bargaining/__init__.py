"""GRPO for bilateral trade, seed 004 (``stratagem train bargaining``).

Parts: ``args`` (the settings and the games they build), ``trainer`` (rollouts, rewards, the
loop), ``rollouts`` (the reward and the context limit), ``report`` (stages and curves). ``from
stratagem.training.bargaining import train_bargaining, BargainingArgs`` loads the trainer (and
torch) on first use only (PEP 562); ``stratagem.training.bargaining.args`` stays light. Other
names of the former single module ``stratagem.training.bargaining`` still resolve, from
``trainer``, for one release.
"""

from __future__ import annotations

from stratagem.lazy import lazy_names

_EXPORTS = {
    "BargainingArgs": "args",
    "train_bargaining": "trainer",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_names(__name__, _EXPORTS, fallback="trainer")
