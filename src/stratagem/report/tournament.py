"""The terminal summary of a tournament: a game's own table where it registers a report, else
the mean payoff per round of every agent in each seat."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from stratagem.game import Game
from stratagem.report.registry import tournament_report


def print_tournament(console: Console, game: Game, result: Any) -> None:
    """Prints ``result.summary``: through the game's registered report, else as a titled table."""
    report = tournament_report(game.name)
    if not len(result.summary):
        console.print("no episode completed: nothing to tabulate")
    elif report is not None:
        console.print(report.table(result.summary))
    else:
        console.print(payoff_table(game.name, result.summary))


def payoff_table(game: str, summary: Any) -> Table:
    """The generic summary (columns agent, seat, mean, sem, count) as a table: ``mean ± sem``
    per agent and seat, with the episodes behind it; one episode has no standard error (—)."""
    table = Table(title=f"{game} round robin: mean payoff per round, by agent and seat")
    table.add_column("agent")
    table.add_column("seat", justify="right")
    table.add_column("payoff per round ± stderr", justify="right", no_wrap=True)
    table.add_column("episodes", justify="right")
    for row in summary.itertuples(index=False):
        sem = "—" if row.count < 2 else f"{row.sem:.4f}"
        table.add_row(str(row.agent), str(row.seat), f"{row.mean:.4f} ± {sem}", str(row.count))
    return table
