"""``stratagem games`` and ``stratagem strategies``."""

from __future__ import annotations

import dataclasses
import json
import re

from rich.console import Console
from rich.table import Table

from stratagem.settings import opt

console = Console()
TEXT_COMMANDS = "eval, tournament, matrix, psro, serve, gen-sft"
SOLVER_COMMANDS = {"tree": "solve, psro --oracle exact", "dialogue": "solve, psro, imitate"}


def games() -> None:
    """List every game: text games (played by agents), solver trees and dialogue games, with
    their parameters (``--param KEY=VALUE``), pool sizes and the commands that take them."""
    from stratagem.games import GAMES, get_game
    from stratagem.metrics.sepo import SEPOGame
    from stratagem.solvers.games import SOLVER_GAMES
    from stratagem.strategies import STRATEGY_MODULES, get_pools

    table = Table(title="Games")
    for col in ("game", "kind", "commands", "params (defaults)", "pools t/e/c/r"):
        table.add_column(col)
    for name in GAMES:
        game = get_game(name)
        sizes = "-"
        if name in STRATEGY_MODULES:
            pools = get_pools(name)
            sizes = "/".join(
                str(len(getattr(pools, p))) for p in ("train", "exploit", "collusive", "robust")
            )
        kind, commands = "text", TEXT_COMMANDS
        if name in SOLVER_GAMES:
            kind += " + " + SOLVER_GAMES.get(name).kind
            commands += ", solve (psro --oracle exact)"
        rounds = f"{game.rounds} rounds" if isinstance(game, SEPOGame) else ""
        params = ", ".join(f"{k}={json.dumps(v)}" for k, v in game.params.items())
        table.add_row(name, kind, commands, "; ".join(filter(None, [params, rounds])), sizes)
    for name, solver_game in SOLVER_GAMES.items():
        if name not in GAMES:
            table.add_row(name, solver_game.kind, SOLVER_COMMANDS[solver_game.kind], "", "-")
    console.print(table)


@dataclasses.dataclass(kw_only=True)
class StrategiesConfig:
    """List a game's strategies with their pool membership and SFT mixture weight."""

    game: str = opt(..., "-g")
    """Game id (see `stratagem games`)."""


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring (its lines joined), never cut mid-clause."""
    text = " ".join((doc or "").split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return match.group(1) if match else text


def list_strategies(cfg: StrategiesConfig) -> None:
    """List a game's strategies with their pool membership and SFT mixture weight."""
    from stratagem.strategies import get_pools, sft_mixture, strategies

    registry = strategies(cfg.game)
    pools = get_pools(cfg.game)
    mixture = sft_mixture(cfg.game)
    table = Table(title=f"{cfg.game} strategies")
    for col in ("strategy", "pools", "SFT weight", "description"):
        table.add_column(col)
    for name, cls in registry.items():
        weight = f"{mixture[name]:.2f}" if name in mixture else ""
        pooled = ", ".join(pools.membership(name)) or "-"
        table.add_row(name, pooled, weight, first_sentence(cls.__doc__))
    console.print(table)
