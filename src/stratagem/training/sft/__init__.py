"""LoRA SFT with TRL and the SFT data it reads (``stratagem train sft``, ``stratagem gen-sft``).

Parts: ``args`` (the settings), ``trainer`` (TRL's SFTTrainer on chats), ``data``
(demonstrations and datasets), ``reasons`` (the demonstrators' written reasons). ``from
stratagem.training.sft import train_sft, SFTArgs`` loads the trainer (and torch) on first use
only (PEP 562); ``stratagem.training.sft.args`` stays light. Other names of the former single
module ``stratagem.training.sft`` still resolve, from ``trainer``, for one release.
"""

from __future__ import annotations

from stratagem.lazy import lazy_names

_EXPORTS = {
    "SFTArgs": "args",
    "train_sft": "trainer",
    "GenSFTArgs": "data",
    "write_dataset": "data",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_names(__name__, _EXPORTS, fallback="trainer")
