"""The games, one module each: the table of contents of the game registry."""

from __future__ import annotations

from stratagem.game import Game
from stratagem.games import (  # noqa: F401 (registers)
    auction,
    bargaining,
    ipd,
    kuhn,
    multi_issue,
    negotiation,
)
from stratagem.games.registry import GAMES


def get_game(name: str) -> Game:
    """A game instance by id (``ipd``, ``auction``, ``negotiation``, ``multi_issue``, ``kuhn``)."""
    return GAMES.get(name)()


def game_names() -> list[str]:
    return GAMES.names()
