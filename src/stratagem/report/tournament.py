"""The terminal summary of a tournament: a game's own table where it registers one."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from stratagem.game import Game, HasTournamentReport


def print_tournament(console: Console, game: Game, result: Any) -> None:
    """Prints ``result.summary``: through the game's report where it has one, else as text."""
    if isinstance(game, HasTournamentReport):
        console.print(game.summary_table(result.summary))
    else:
        console.print(result.summary.to_string(index=False))
