"""What plays episodes to measure an agent; each function returns its result and writes nothing
a command did not ask for.

- ``pools``: SEPO evaluation against every pool of a game (``evaluate`` → ``Evaluation``);
- ``acceptance``: the IR acceptance curve of a bargaining agent (``acceptance_curve``).
"""

from __future__ import annotations

from stratagem.lazy import lazy_names

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
__getattr__ = lazy_names(__name__, _EXPORTS)
