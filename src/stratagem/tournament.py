"""Every strategy against every strategy: mean per-round payoff matrices."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from stratagem.game import Game
from stratagem.play import EpisodeSpec, play
from stratagem.seeding import derive
from stratagem.strategies import get_strategy, strategies


def payoff_matrix(
    game: Game, names: Sequence[str] | None = None, *, episodes: int = 20, seed: int = 0
) -> pd.DataFrame:
    """Mean per-round payoff of the row strategy (seat 0) against the column strategy (seat 1)."""
    names = list(names or strategies(game.name).names())
    agents = {n: get_strategy(game.name, n) for n in names}

    def specs():
        for row in names:
            for col in names:
                # self-play needs two instances so each seat gets its own batch entry
                opponent = agents[col] if col != row else get_strategy(game.name, col)
                for i in range(episodes):
                    yield EpisodeSpec(
                        f"{row}/{col}/{i:04d}",
                        derive(seed, "matrix", game.name, i),
                        (agents[row], opponent),
                        {"row": row, "col": col},
                    )

    sums: dict[tuple[str, str], list[float]] = {}
    for trace in play(game, specs()):
        per_round = trace.totals()[0] / max(len(trace.rounds), 1)
        sums.setdefault((trace.meta["row"], trace.meta["col"]), []).append(per_round)
    table = pd.DataFrame(index=names, columns=names, dtype=float)
    for (row, col), xs in sums.items():
        table.loc[row, col] = sum(xs) / len(xs)
    table.index.name = "row (seat 0)"
    table.columns.name = "column (seat 1)"
    return table
