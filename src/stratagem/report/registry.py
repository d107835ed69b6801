"""Per-game tournament reports, registered by game name (DESIGN §3.7).

A game whose round robins need more than mean payoff per agent and seat registers a
``TournamentReport`` here from its module in ``report/`` (listed in ``report/__init__``); the
tournament looks it up by the game's name, so games never import report code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stratagem.registry import Registry
from stratagem.trace import Trace


@dataclass(frozen=True)
class TournamentReport:
    """How one game reports a tournament.

    Attributes:
        write: ``(traces, folder) -> (summary DataFrame, files written)``: writes the game's
            tables and plots of a tournament into ``folder`` from its traces (read once).
        table: ``summary -> renderable``: what the CLI prints for that summary (a rich table or
            a string).
    """

    write: Callable[[Iterable[Trace], Path], tuple[Any, list[Path]]]
    table: Callable[[Any], Any]


TOURNAMENT_REPORTS: Registry[TournamentReport] = Registry("tournament report")


def tournament_report(game: str) -> TournamentReport | None:
    """Returns the report registered for the game named ``game``, or None (the generic one:
    mean payoff per round by agent and seat)."""
    return TOURNAMENT_REPORTS.get(game) if game in TOURNAMENT_REPORTS else None
