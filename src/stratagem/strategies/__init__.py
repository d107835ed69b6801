"""Rule-based strategies, one module per game (same names as ``games/``): the table of contents.

Each module defines ``STRATEGIES`` (a registry keyed by class name), ``POOLS`` and ``SFT_MIXTURE``
and is registered here under its game's id. A new game's module registers itself the same way
(``register_strategies("mygame", module)``), with no edit to generic code.
"""

from __future__ import annotations

from types import ModuleType

from stratagem.agent import Strategy
from stratagem.errors import UnknownNameError
from stratagem.pools import Pools, check_mixture
from stratagem.registry import Registry

STRATEGY_MODULES: Registry[ModuleType] = Registry("strategy module")


def register_strategies(game: str, module: ModuleType) -> ModuleType:
    """Register ``module`` (with ``STRATEGIES``, ``POOLS``, ``SFT_MIXTURE``) as ``game``'s
    strategies, after checking that its pools and mixture name registered strategies."""
    module.POOLS.check_registered(module.STRATEGIES, f"{game} strategy")
    check_mixture(module.SFT_MIXTURE, module.STRATEGIES, f"{game} strategy")
    return STRATEGY_MODULES.register(module, game)


def _module(game: str) -> ModuleType:
    if game not in STRATEGY_MODULES:
        from stratagem.games import get_game

        get_game(game)  # a clear error for an unknown game
        raise UnknownNameError("game with strategies", game, STRATEGY_MODULES.names())
    return STRATEGY_MODULES.get(game)


def strategies(game: str) -> Registry[type[Strategy]]:
    """Returns the registry of ``game``'s strategies."""
    return _module(game).STRATEGIES


def get_strategy(game: str, name: str) -> Strategy:
    """Returns a fresh instance of the strategy ``name`` of ``game``."""
    return strategies(game).get(name)()


def get_pools(game: str) -> Pools:
    """Returns ``game``'s opponent pools."""
    return _module(game).POOLS


def sft_mixture(game: str) -> dict[str, float]:
    """Returns ``game``'s SFT demonstrator mixture (strategy name -> weight)."""
    return dict(_module(game).SFT_MIXTURE)


from stratagem.strategies import (  # noqa: E402 (the modules import the helpers above)
    auction,
    bargaining,
    dond,
    ipd,
    kuhn,
    leduc,
    multi_issue,
    negotiation,
)

for _game, _mod in (
    ("ipd", ipd),
    ("auction", auction),
    ("negotiation", negotiation),
    ("multi_issue", multi_issue),
    ("kuhn", kuhn),
    ("leduc", leduc),
    ("bargaining", bargaining),
    ("dond", dond),
):
    register_strategies(_game, _mod)
