"""``stratagem matrix``: every strategy against every strategy of a game."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from stratagem.games import get_game

console = Console()


def matrix_command(
    game: str = typer.Option(..., "--game", "-g", help="Game id."),
    episodes: int = typer.Option(20, "--episodes", "-n", min=1, help="Episodes per pairing."),
    seed: int = typer.Option(0, "--seed", "-s"),
    out: Path = typer.Option(None, "--out", "-o", help="Folder for CSV and PNG [runs/<game>]."),
) -> None:
    """Mean per-round payoff of every strategy (row) against every strategy (column)."""
    from stratagem.report.plots import heatmap
    from stratagem.tournament import payoff_matrix

    the_game = get_game(game)
    table = payoff_matrix(the_game, episodes=episodes, seed=seed)
    folder = out or Path("runs") / game
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "matrix.csv")
    png = heatmap(
        table, folder / "matrix.png", f"{game}: mean payoff per round of the row strategy"
    )
    view = Table(title=f"{game}: row's mean payoff per round vs column ({episodes} episodes)")
    view.add_column("row \\ column")
    for col in table.columns:
        view.add_column(col, justify="right")
    for row, values in table.iterrows():
        view.add_row(str(row), *(f"{v:.2f}" for v in values))
    console.print(view)
    console.print(f"wrote {folder / 'matrix.csv'} and {png}")
