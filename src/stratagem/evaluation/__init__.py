"""What plays episodes to measure an agent; each function returns its result and writes nothing
a command did not ask for.

- ``pools``: SEPO evaluation against every pool of a game (``evaluate`` → ``Evaluation``);
- ``acceptance``: the IR acceptance curve of a bargaining agent (``acceptance_curve``).
"""

from stratagem.evaluation.pools import (
    Evaluation,
    count_episodes,
    episode_seed,
    evaluate,
    run_status,
    runtime,
    sepo_episodes,
)

__all__ = [
    "Evaluation",
    "count_episodes",
    "episode_seed",
    "evaluate",
    "run_status",
    "runtime",
    "sepo_episodes",
]
