"""What plays episodes to measure an agent; each function returns its result and writes nothing
a command did not ask for.

- ``pools``: SEPO evaluation against every pool of a game (``evaluate`` → ``Evaluation``);
- ``acceptance``: the IR acceptance curve of a bargaining agent (``acceptance_curve``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Evaluation": "pools",
    "count_episodes": "pools",
    "episode_seed": "pools",
    "evaluate": "pools",
    "run_status": "pools",
    "runtime": "pools",
    "sepo_episodes": "pools",
    "acceptance_curve": "acceptance",
    "AcceptanceCurve": "acceptance",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:  # PEP 562: a submodule loads on first use of its names
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
