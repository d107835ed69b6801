"""The solver games: every game ``solve``, ``psro`` and ``imitate`` can take a tree of, in one
registry (OpenSpiel keeps even its chat games in its one game registry).

Two kinds:
- ``tree``: an eager extensive-form tree (Kuhn and Leduc, text games that declare
  ``HasSolverTree``), with its published game value where one exists;
- ``dialogue``: an LLM-expanded dialogue tree over a domain's scenarios (meeting, fruit, debate;
  seed 003), expanded by ``solvers.dialogue`` with a model.

Commands ask this registry what a game is, never its name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from stratagem.errors import ConfigError
from stratagem.registry import Registry

if TYPE_CHECKING:
    from stratagem.tree import Node


@dataclass(frozen=True)
class SolverGame:
    """A game with a solver tree: its kind, how to build the tree (``tree`` kind), its published
    player-0 value with the source, and a one-sentence description."""

    name: str
    kind: Literal["tree", "dialogue"]
    description: str
    tree: Callable[[], Node] | None = None
    value: tuple[float, str] | None = None

    def game_tree(self) -> Node:
        """Returns the eager tree of a ``tree`` game; a dialogue game's trees need a model."""
        if self.tree is None:
            raise ConfigError(f"{self.name} is a dialogue game: its trees are expanded by a model")
        return self.tree()


SOLVER_GAMES: Registry[SolverGame] = Registry("solver game")


def _kuhn() -> Node:
    from stratagem.games import get_game

    return get_game("kuhn").game_tree()  # type: ignore[attr-defined]


def _leduc() -> Node:
    from stratagem.games import get_game

    return get_game("leduc").game_tree()  # type: ignore[attr-defined]


SOLVER_GAMES.register(
    SolverGame(
        "kuhn",
        "tree",
        "Kuhn poker: three cards, one bet; its text game plays the same tree.",
        _kuhn,
        (-1 / 18, "Kuhn 1950"),
    )
)
SOLVER_GAMES.register(
    SolverGame(
        "leduc",
        "tree",
        "Leduc poker: six cards, two betting rounds; OpenSpiel's tree, and its text game plays it.",
        _leduc,
    )
)
for _name, _description in {
    "meeting": "Meeting scheduling (seed 003): agree on a day; an action is the day to push for.",
    "fruit": "Fruit trading (seed 003): swap fruit; an action is the tone of the next message.",
    "debate": "Debate (seed 003): argue a motion; an action is logos, ethos or pathos; a model "
    "judges.",
}.items():
    SOLVER_GAMES.register(SolverGame(_name, "dialogue", _description))


def solver_game(name: str) -> SolverGame:
    """Returns the solver game ``name``.

    Raises:
        ConfigError: ``name`` is a text game without a solver tree.
        UnknownNameError: no game has that name (the message suggests close ones).
    """
    from stratagem.games import game_names

    if name not in SOLVER_GAMES and name in game_names():
        names = ", ".join(SOLVER_GAMES)
        raise ConfigError(f"game {name!r} has no solver tree (solver games: {names})")
    return SOLVER_GAMES.get(name)


def dialogue_games() -> list[str]:
    """Returns the names of the dialogue games."""
    return [n for n, g in SOLVER_GAMES.items() if g.kind == "dialogue"]
