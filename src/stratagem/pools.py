"""Opponent pools and SFT demonstrator mixtures (SPEC §1, §2; SEPO §3.2).

A strategy is in at most one of train/exploit/collusive for a game: overlapping pools would give
conflicting gradients. ``robust`` holds distribution-shifted opponents for evaluation only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stratagem.errors import ConfigError, UnknownNameError

POOL_NAMES = ("train", "exploit", "collusive", "robust")


@dataclass(frozen=True)
class Pools:
    """A game's opponent pools: the strategy names in each role (SPEC §1).

    Raises ``ConfigError`` on construction when a strategy is in more than one of ``train``,
    ``exploit`` and ``collusive``; ``robust`` may share members with them.
    """

    train: tuple[str, ...]
    exploit: tuple[str, ...]
    collusive: tuple[str, ...] = ()
    robust: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for pool in ("train", "exploit", "collusive"):
            for name in getattr(self, pool):
                if name in seen:
                    raise ConfigError(
                        f"strategy {name!r} is in both the {seen[name]} and {pool} pools; "
                        "train, exploit and collusive pools must be disjoint"
                    )
                seen[name] = pool

    def items(self) -> list[tuple[str, tuple[str, ...]]]:
        """(pool name, members) for every non-empty pool, in SPEC order."""
        return [(p, getattr(self, p)) for p in POOL_NAMES if getattr(self, p)]

    def membership(self, strategy: str) -> list[str]:
        """Returns the pools ``strategy`` is in, in SPEC order (empty when none)."""
        return [p for p in POOL_NAMES if strategy in getattr(self, p)]

    def check_registered(self, known: Iterable[str], kind: str) -> None:
        """Raises ``UnknownNameError`` for the first pool member not in ``known``."""
        known = list(known)
        for _, members in self.items():
            for name in members:
                if name not in known:
                    raise UnknownNameError(kind, name, known)


def check_mixture(mixture: Mapping[str, float], known: Iterable[str], kind: str) -> None:
    """An SFT mixture must name registered strategies and sum to 1."""
    known = list(known)
    for name in mixture:
        if name not in known:
            raise UnknownNameError(kind, name, known)
    total = sum(mixture.values())
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise ConfigError(f"{kind} SFT mixture sums to {total}, not 1")
