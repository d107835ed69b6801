"""SEPO-GRPO, the safety-regularised trainer of seed 000 (``stratagem train sepo``).

Parts: ``args`` (the settings), ``trainer`` (rollouts, evaluation, the loop), ``rewards``
(per-round rewards and groups), ``report`` (curves and action plots), ``ablation`` (one arm per
value), ``best_responder`` (the exact best response as an exploiter). ``from
stratagem.training.sepo import train_sepo, SEPOArgs`` loads the trainer (and torch) on first use
only (PEP 562); ``stratagem.training.sepo.args`` stays light. Other names of the former single
module ``stratagem.training.sepo`` still resolve, from ``trainer``, for one release.
"""

from __future__ import annotations

from stratagem.lazy import lazy_names

_EXPORTS = {
    "SEPOArgs": "args",
    "train_sepo": "trainer",
    "run_ablation": "ablation",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_names(__name__, _EXPORTS, fallback="trainer")
