"""``stratagem solve``: CFR or CFR+ on a solver game's tree (Kuhn, Leduc poker).

Writes into the run folder: the resolved config, the average policy (``policy.json``), the
exploitability curve (``curve.csv`` and ``exploitability.png``) and a summary with the game value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import typer
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.table import Table

from stratagem.cli.config import load_config
from stratagem.errors import ConfigError, did_you_mean
from stratagem.runs import check_out_path
from stratagem.solvers.tree import Node

console = Console()
SOLVER_ONLY = ("leduc",)  # solver games that are not text games (not in the game registry)
KNOWN_VALUES = {"kuhn": (-1 / 18, "Kuhn 1950")}  # player 0's game value, with its source


class SolveConfig(BaseModel):
    """Every ``stratagem solve`` setting (flags override a config file's)."""

    model_config = ConfigDict(extra="forbid")

    game: str
    algorithm: Literal["cfr", "cfr+"] = "cfr+"
    iterations: int = Field(1000, gt=0)
    points: int = Field(60, gt=0, description="checkpoints on the exploitability curve")
    out: str | None = None


def solver_tree(game: str) -> Node:
    """Returns the solver tree of ``game``: Leduc, or a registered game declaring one (Kuhn);
    raises ``ConfigError`` for a game without one."""
    if game == "leduc":
        from stratagem.games.leduc import game_tree

        return game_tree()
    from stratagem.game import HasSolverTree
    from stratagem.games import game_names, get_game

    if game not in game_names():
        names = sorted({*SOLVER_ONLY, *game_names()})
        raise ConfigError(f"unknown game {game!r}{did_you_mean(game, names)}")
    the_game = get_game(game)
    if not isinstance(the_game, HasSolverTree):
        raise ConfigError(f"game {game!r} has no solver tree (solver games: kuhn, leduc)")
    return the_game.game_tree()


def solve_command(
    game: str = typer.Option(None, "--game", "-g", help="Solver game: kuhn or leduc."),
    algorithm: str = typer.Option(None, "--algorithm", "-a", help="cfr or cfr+ (default: cfr+)."),
    iterations: int = typer.Option(None, "--iterations", "-n", help="Iterations (default: 1000)."),
    points: int = typer.Option(None, help="Checkpoints on the exploitability curve (default: 60)."),
    out: str = typer.Option(
        None, "--out", "-o", help="Run folder (default: runs/solve-<game>-<alg>)."
    ),
    config: Path = typer.Option(None, "--config", "-c", help="YAML or TOML file of settings."),
) -> None:
    """Solve a two-player poker game with CFR or CFR+: policy, value and exploitability curve."""
    from stratagem.solvers.cfr import solve

    cfg = load_config(
        SolveConfig,
        config,
        game=game,
        algorithm=algorithm,
        iterations=iterations,
        points=points,
        out=out,
    )
    tree = solver_tree(cfg.game)
    folder = check_out_path(cfg.out or Path("runs") / f"solve-{cfg.game}-{cfg.algorithm}")
    folder.mkdir(parents=True, exist_ok=True)
    solution = solve(tree, cfg.algorithm, cfg.iterations, points=cfg.points)
    (folder / "config.json").write_text(cfg.model_dump_json(indent=2) + "\n")
    (folder / "policy.json").write_text(json.dumps(solution.policy, indent=2, sort_keys=True))
    (folder / "curve.csv").write_text(
        "iteration,exploitability\n" + "".join(f"{i},{e!r}\n" for i, e in solution.curve)
    )
    summary = {
        "game": cfg.game,
        "algorithm": cfg.algorithm,
        "iterations": cfg.iterations,
        "value": list(solution.value),
        "exploitability": solution.exploitability,
        "seconds": solution.seconds,
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    png = plot_curve(solution.curve, folder / "exploitability.png", f"{cfg.game} · {cfg.algorithm}")
    table = Table(title=f"{cfg.algorithm} on {cfg.game}, {cfg.iterations} iterations")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("game value (player 0)", f"{solution.value[0]:.6f}")
    if cfg.game in KNOWN_VALUES:
        value, source = KNOWN_VALUES[cfg.game]
        table.add_row(f"published value ({source})", f"{value:.6f}")
    table.add_row("exploitability (NashConv / 2)", f"{solution.exploitability:.3e}")
    table.add_row("seconds iterating", f"{solution.seconds:.3f}")
    console.print(table)
    console.print(f"wrote {folder / 'policy.json'}, {folder / 'curve.csv'} and {png}")


def plot_curve(curve: tuple[tuple[int, float], ...], path: Path, title: str) -> Path:
    """Draws exploitability against iterations (log-log) into ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs, ys = zip(*curve, strict=True)
    ax.loglog(xs, [max(y, 1e-16) for y in ys], marker=".")
    ax.set_xlabel("iteration")
    ax.set_ylabel("exploitability of the average policy")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
