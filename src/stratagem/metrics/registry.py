"""Per-game evaluation metrics, registered by game name (DESIGN §3.7).

A game with its own metrics (Deal or No Deal: scores, agreement, Pareto rate, ...) registers
them here from its module in ``metrics/`` (listed in ``metrics/__init__``); ``evaluate`` and
``report`` use them where SEPO's do not apply, so games never import metrics code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from stratagem.metrics.estimate import Estimate
from stratagem.registry import Registry
from stratagem.trace import Trace

GameMetrics = Callable[[Sequence[Trace]], dict[str, Estimate]]
"""``traces -> {metric name: Estimate}`` of the agent in ``trace.meta["seat"]`` (seat 0 by
default), computed from complete traces only."""

GAME_METRICS: Registry[GameMetrics] = Registry("game metrics")


def game_metrics(game: str) -> GameMetrics | None:
    """Returns the metrics registered for the game named ``game``, or None."""
    return GAME_METRICS.get(game) if game in GAME_METRICS else None
