"""Terminal tables of results (rich), shaped to fit an 80-column terminal."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from stratagem.report.tables import LABELS

if TYPE_CHECKING:
    from stratagem.evaluation.pools import Evaluation


def estimate_cell(value: float, stderr: float) -> str:
    """``value ± stderr`` in one cell, 4 decimals (about 17 characters)."""
    return f"{value:.4f} ± {stderr:.4f}"


def print_evaluation(console: Console, result: Evaluation) -> None:
    """Prints the metrics table of an evaluation (a metric measured on no episode as —), whether
    payoffs were normalised, the error count and the run folder."""
    n_ep = result.episodes or len(result.traces)
    kind = "SEPO metrics" if "safety_j" in result.metrics else "Metrics"
    table = Table(title=f"{kind} · {result.game} · {result.agent} · {n_ep} episodes")
    table.add_column("metric")
    table.add_column("value ± stderr", justify="right", no_wrap=True)
    table.add_column("episodes", justify="right")
    for key, est in result.metrics.items():
        label = LABELS.get(key, key)
        if est.n == 0:  # nothing measured: missing, never a 0.0 that reads as a result
            table.add_row(label, "—", "0")
        else:
            table.add_row(label, estimate_cell(est.value, est.stderr), str(est.n))
    if result.exact_exploitability is not None:
        table.add_row(LABELS["exact_exploitability"], f"{result.exact_exploitability:.6f}", "exact")
    console.print(table)
    console.print(
        f"payoffs normalised: {'yes' if result.normalised else 'no'}"
        + (f" · errors: {result.errors}" if result.errors else "")
    )
    if result.out is not None:
        console.print(f"run folder: {result.out}")


COMMANDS_BY_KIND = {
    "text": "eval, tournament, matrix, psro, serve, gen-sft",
    "tree": "solve, psro --oracle exact",
    "dialogue": "solve, psro, imitate, dialogue",
}


def games_table() -> Table:
    """Every game in one table: text games (played by agents), solver trees and dialogue games,
    with their kind, rounds and pool sizes (train / exploit / collusive / robust)."""
    from stratagem.games import GAMES, get_game
    from stratagem.metrics.sepo import SEPOGame
    from stratagem.solvers.games import SOLVER_GAMES
    from stratagem.strategies import STRATEGY_MODULES, get_pools

    table = Table(title="Games")
    for col in ("game", "kind", "rounds", "pools t/e/c/r"):
        table.add_column(col, no_wrap=True)
    for name in GAMES:
        game = get_game(name)
        sizes = "-"
        if name in STRATEGY_MODULES:
            pools = get_pools(name)
            sizes = "/".join(
                str(len(getattr(pools, p))) for p in ("train", "exploit", "collusive", "robust")
            )
        kind = "text" + (" + " + SOLVER_GAMES.get(name).kind if name in SOLVER_GAMES else "")
        rounds = str(game.rounds) if isinstance(game, SEPOGame) else "-"
        table.add_row(name, kind, rounds, sizes)
    for name, solver_game in SOLVER_GAMES.items():
        if name not in GAMES:
            table.add_row(name, solver_game.kind, "-", "-")
    return table


def games_notes() -> list[str]:
    """The lines under the games table: the commands each kind of game takes, and every text
    game's parameters (``--param KEY=VALUE``) with their defaults, in full."""
    from stratagem.games import GAMES, get_game

    lines = ["Commands by kind:"]
    lines += [f"  {kind}: {commands}" for kind, commands in COMMANDS_BY_KIND.items()]
    lines.append("Parameters (--param KEY=VALUE) and their defaults:")
    for name in GAMES:
        params = ", ".join(f"{k}={json.dumps(v)}" for k, v in get_game(name).params.items())
        lines.append(f"  {name}: {params or 'none'}")
    return lines
