"""The terminal summary of a tournament: a game's own table where it registers a report."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from stratagem.game import Game
from stratagem.report.registry import tournament_report


def print_tournament(console: Console, game: Game, result: Any) -> None:
    """Prints ``result.summary``: through the game's registered report, else as text."""
    report = tournament_report(game.name)
    if not len(result.summary):
        console.print("no episode completed: nothing to tabulate")
    elif report is not None:
        console.print(report.table(result.summary))
    else:
        console.print(result.summary.to_string(index=False))
