"""``stratagem matrix``: every strategy against every strategy of a game."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stratagem.cli.options import GameGroup, RunGroup
from stratagem.settings import Positive, opt

console = Console()


@dataclasses.dataclass(kw_only=True)
class MatrixConfig(RunGroup, GameGroup):
    """Play every strategy against every strategy of a game.

    The mean per-round payoff of each strategy (row) against each (column), as a table and a
    heatmap."""

    episodes: Positive = opt(20, "-n")
    """Episodes per pairing."""


def matrix_command(cfg: MatrixConfig) -> None:
    """Mean per-round payoff of every strategy (row) against every strategy (column)."""
    from stratagem.games import get_game
    from stratagem.report.plots import heatmap
    from stratagem.tournament import payoff_matrix

    table = payoff_matrix(get_game(cfg.game, **cfg.params), episodes=cfg.episodes, seed=cfg.seed)
    folder = cfg.run_folder(Path("runs") / cfg.game)
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "matrix.csv")
    png = heatmap(
        table, folder / "matrix.png", f"{cfg.game}: mean payoff per round of the row strategy"
    )
    title = f"{cfg.game}: row's mean payoff per round vs column ({cfg.episodes} episodes)"
    console.print(matrix_view(table, title))
    console.print(f"wrote {folder / 'matrix.csv'} and {png}")


def matrix_view(table: Any, title: str) -> Table:
    """The payoff matrix as a terminal table: rows named in full, columns numbered as the rows
    are (a name would not fit in a column), the key in the caption."""
    if list(table.columns) != list(table.index):
        raise ValueError("a payoff matrix lists the same strategies as rows and columns")
    view = Table(title=title, caption="columns: the row of the same number")
    view.add_column("#", justify="right")
    view.add_column("row strategy", no_wrap=True)
    for i in range(len(table.columns)):
        view.add_column(str(i + 1), justify="right")
    for i, (row, values) in enumerate(table.iterrows()):
        view.add_row(str(i + 1), str(row), *(f"{v:.2f}" for v in values))
    return view
