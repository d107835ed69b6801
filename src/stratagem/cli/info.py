"""``stratagem games`` and ``stratagem strategies``."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from stratagem.games import GAMES, get_game
from stratagem.metrics.sepo import SEPOGame
from stratagem.strategies import STRATEGY_MODULES, get_pools, sft_mixture, strategies

console = Console()


def games() -> None:
    """List the games, their parameters (``--param KEY=VALUE``) and pool sizes."""
    table = Table(title="Games")
    for col in ("game", "version", "rounds", "params (defaults)", "pools (t/e/c/r)"):
        table.add_column(col)
    for name in GAMES:
        game = get_game(name)
        sizes = "-"
        if name in STRATEGY_MODULES:
            pools = get_pools(name)
            sizes = "/".join(
                str(len(getattr(pools, p))) for p in ("train", "exploit", "collusive", "robust")
            )
        rounds = str(game.rounds) if isinstance(game, SEPOGame) else "varies"
        params = ", ".join(f"{k}={json.dumps(v)}" for k, v in game.params.items())
        table.add_row(name, str(game.version), rounds, params, sizes)
    console.print(table)


def list_strategies(game: str = typer.Option(..., "--game", "-g", help="Game id.")) -> None:
    """List a game's strategies with their pool membership and SFT mixture weight."""
    registry = strategies(game)
    pools = get_pools(game)
    mixture = sft_mixture(game)
    table = Table(title=f"{game} strategies")
    for col in ("strategy", "pools", "SFT weight", "description"):
        table.add_column(col)
    for name, cls in registry.items():
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        weight = f"{mixture[name]:.2f}" if name in mixture else ""
        table.add_row(name, ", ".join(pools.membership(name)) or "-", weight, doc)
    console.print(table)
