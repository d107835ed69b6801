"""``stratagem games`` and ``stratagem strategies``."""

from __future__ import annotations

import dataclasses
import re

from rich.console import Console
from rich.table import Table

from stratagem.settings import opt

console = Console()


def games() -> None:
    """List every game with its parameters and pools.

    Text games (played by agents), solver trees and dialogue games, with their parameters
    (``--param KEY=VALUE``), pool sizes and the commands that take them."""
    from stratagem.report.console import games_notes, games_table

    console.print(games_table())
    for line in games_notes():
        console.print(line, highlight=False, markup=False)


@dataclasses.dataclass(kw_only=True)
class StrategiesConfig:
    """List a game's strategies, their pools and SFT weights."""

    game: str = opt(..., "-g")
    """Game id (see `stratagem games`)."""


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring (its lines joined), never cut mid-clause."""
    text = " ".join((doc or "").split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return match.group(1) if match else text


def list_strategies(cfg: StrategiesConfig) -> None:
    """List a game's strategies, their pools and SFT weights."""
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
