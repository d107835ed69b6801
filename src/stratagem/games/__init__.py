"""The games, one module each: the table of contents of the game registry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stratagem.errors import ConfigError
from stratagem.game import Game
from stratagem.games import (  # noqa: F401 (registers)
    auction,
    bargaining,
    dond,
    ipd,
    kuhn,
    leduc,
    multi_issue,
    negotiation,
)
from stratagem.games.registry import GAMES


def get_game(name: str, **params: Any) -> Game:
    """Returns the game ``name`` (``ipd``, ``kuhn``, ``bargaining``, ...) built with ``params``.

    Raises ``UnknownNameError`` for an unknown game and ``ConfigError`` for a parameter the game
    does not take or a bad value.
    """
    cls = GAMES.get(name)
    try:
        return cls(**params)
    except TypeError as exc:
        if "argument" not in str(exc):
            raise
        import inspect

        accepted = [
            p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "items")
        ]
        raise ConfigError(
            f"{name} takes the parameters {', '.join(accepted) or '(none)'}; got "
            f"{', '.join(sorted(params))}"
        ) from None


def game_names() -> list[str]:
    """Returns the registered game ids, in registration order."""
    return GAMES.names()


@dataclass(frozen=True)
class GameSpec:
    """A game by id and parameters: serialisable (JSON), so a worker or a resumed run rebuilds
    exactly the same game."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, game: Game) -> GameSpec:
        """Returns the spec that rebuilds ``game``."""
        return cls(game.name, dict(game.params))

    def build(self) -> Game:
        """Returns the game this spec names."""
        return get_game(self.name, **self.params)

    def to_dict(self) -> dict[str, Any]:
        """Returns ``{"name", "params"}`` (JSON values)."""
        return {"name": self.name, "params": dict(self.params)}
