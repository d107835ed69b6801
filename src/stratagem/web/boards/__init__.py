"""What the person sees of each game and how their input becomes a decision: the boards of the
play page, one module per board, registered by game id (the import list below is the table of
contents), and the generic text board that shows every other registered game.

``board_for(game)`` is the one lookup: a game's dedicated board when it has one (Deal or No Deal,
bargaining, IPD, Kuhn poker: forms and tables that read their own game's state), else the text
board, which needs only the public ``Observation`` / ``Episode`` interfaces — so a new game is
served the moment it is registered.
"""

from __future__ import annotations

from stratagem.errors import UnknownNameError
from stratagem.web.boards import bargaining, choice, dond  # noqa: F401 (registers)
from stratagem.web.boards.base import (
    BOARDS,
    MAX_MESSAGE_CHARS,
    Board,
    InputError,
    clean_text,
    register_board,
)
from stratagem.web.boards.text import TextBoard

__all__ = [
    "BOARDS",
    "MAX_MESSAGE_CHARS",
    "Board",
    "InputError",
    "TextBoard",
    "board_for",
    "clean_text",
    "register_board",
]

_TEXT = TextBoard()


def board_for(game: str) -> Board:
    """Returns the board of ``game``: its registered board, else the generic text board for a
    registered game.

    Raises:
        UnknownNameError: ``game`` is not a registered game.
    """
    from stratagem.games import game_names

    if game in BOARDS:
        return BOARDS.get(game)
    names = game_names()
    if game not in names:
        raise UnknownNameError("game for the play page", game, names)
    return _TEXT
