"""GRPO for bilateral trade, seed 004 (``stratagem train bargaining``).

Parts: ``args`` (the settings and the games they build), ``trainer`` (rollouts, rewards, the
loop), ``rollouts`` (the reward and the context limit), ``report`` (stages and curves). ``from
stratagem.training.bargaining import train_bargaining, BargainingArgs`` loads the trainer (and
torch) on first use only (PEP 562); ``stratagem.training.bargaining.args`` stays light. Other
names of the former single module ``stratagem.training.bargaining`` still resolve, from
``trainer``, for one release.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BargainingArgs": "args",
    "train_bargaining": "trainer",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name, "trainer")
    try:
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
