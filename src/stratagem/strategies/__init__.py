"""Rule-based strategies, one module per game (same names as ``games/``): the table of contents.

Each module defines ``STRATEGIES`` (a registry keyed by class name), ``POOLS`` and ``SFT_MIXTURE``.
"""

from __future__ import annotations

from types import ModuleType

from stratagem.agent import Strategy
from stratagem.games import get_game
from stratagem.pools import Pools, check_mixture
from stratagem.registry import Registry
from stratagem.strategies import auction, bargaining, ipd, kuhn, multi_issue, negotiation

_BY_GAME: dict[str, ModuleType] = {
    "ipd": ipd,
    "auction": auction,
    "negotiation": negotiation,
    "multi_issue": multi_issue,
    "kuhn": kuhn,
    "bargaining": bargaining,
}
for _game, _module in _BY_GAME.items():
    _module.POOLS.check_registered(_module.STRATEGIES, f"{_game} strategy")
    check_mixture(_module.SFT_MIXTURE, _module.STRATEGIES, f"{_game} strategy")


def _module(game: str) -> ModuleType:
    get_game(game)  # a clear error for an unknown game
    return _BY_GAME[game]


def strategies(game: str) -> Registry[type[Strategy]]:
    """The registry of ``game``'s strategies."""
    return _module(game).STRATEGIES


def get_strategy(game: str, name: str) -> Strategy:
    """A fresh instance of the strategy ``name`` of ``game``."""
    return strategies(game).get(name)()


def get_pools(game: str) -> Pools:
    return _module(game).POOLS


def sft_mixture(game: str) -> dict[str, float]:
    return dict(_module(game).SFT_MIXTURE)
