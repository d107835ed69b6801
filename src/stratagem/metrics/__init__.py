"""Metrics: plain functions from traces to ``Estimate(value, stderr, n)``.

The imports below are the table of contents of the per-game metrics: each module registers its
game's metrics in ``metrics.registry.GAME_METRICS`` under the game's name.
"""

from stratagem.metrics import dond  # noqa: F401 (registers the DoND metrics)
from stratagem.metrics.estimate import Estimate, mean_estimate

__all__ = ["Estimate", "mean_estimate"]
