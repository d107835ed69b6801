"""SEPO-GRPO, the safety-regularised trainer of seed 000 (``stratagem train sepo``).

Parts: ``args`` (the settings), ``trainer`` (rollouts, evaluation, the loop), ``rewards``
(per-round rewards and groups), ``report`` (curves and action plots), ``ablation`` (one arm per
value), ``best_responder`` (the exact best response as an exploiter). ``from
stratagem.training.sepo import train_sepo, SEPOArgs`` loads the trainer (and torch) on first use
only (PEP 562); ``stratagem.training.sepo.args`` stays light. Other names of the former single
module ``stratagem.training.sepo`` still resolve, from ``trainer``, for one release.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SEPOArgs": "args",
    "train_sepo": "trainer",
    "run_ablation": "ablation",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name, "trainer")
    try:
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
