"""Rule-based Leduc strategies, pools and SFT mixture.

Every Leduc strategy states its exact distribution at every decision (``probabilities``), so its
policy at all 936 information sets is known and exact exploitability reads it.

Most are tables over what a simple player weighs: the round, whether a raise is to be answered
and the strength of the hand (round 1: the rank; round 2: a pair with the public card, else the
rank). ``LeducCFR`` is the equilibrium: CFR+'s average policy on the exact tree, shipped as data
(``data/leduc_cfr.json``, written by ``python -m stratagem.solvers.shipped`` and checked against
a fresh solve by the tests).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, ClassVar

from stratagem.agent import Strategy
from stratagem.errors import ConfigError
from stratagem.games.leduc import Act, LeducView, key_of, rank
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("leduc strategy")
CFR_DATA = "leduc_cfr.json"
Mix = tuple[float, float]  # (P(RAISE), P(CALL)); facing a raise FOLD takes the rest
Table = dict[tuple[int, bool], dict[str, Mix]]  # (round, facing a raise) -> strength -> mix


def strength(view: LeducView) -> str:
    """The hand's strength as the tables read it: ``"pair"`` when the private card pairs the
    public card, else the private card's rank (``"J"``, ``"Q"``, ``"K"``)."""
    if view.public is not None and rank(view.card) == rank(view.public):
        return "pair"
    return view.card[0]


class TableStrategy(Strategy):
    """A Leduc strategy as a table: ``table[(round, facing)][strength] = (raise, call)``.

    With no raise to answer, CALL (a check) gets ``1 - raise``; facing one, FOLD gets
    ``1 - raise - call``. Where a third raise is not allowed, the raise share goes to CALL.
    """

    table: ClassVar[Table]

    def probabilities(self, view: LeducView) -> dict[Act, float]:
        """Returns the table's distribution over the legal actions at ``view``."""
        raise_, call = self.table[(view.round, view.facing_raise)][strength(view)]
        if not view.facing_raise:
            call = 1.0 - raise_
        if Act.RAISE not in view.legal:
            raise_, call = 0.0, call + raise_
        mix = {Act.FOLD: 1.0 - raise_ - call, Act.CALL: call, Act.RAISE: raise_}
        return {a: mix[a] for a in view.legal}


def table(open1: dict[str, float], facing1: dict, open2: dict[str, float], facing2: dict) -> Table:
    """Returns a table from the raise probabilities when opening each round (``open1``,
    ``open2``: strength -> P(RAISE)) and the (raise, call) mixes facing a raise."""
    return {
        (1, False): {s: (p, 1.0 - p) for s, p in open1.items()},
        (1, True): facing1,
        (2, False): {s: (p, 1.0 - p) for s, p in open2.items()},
        (2, True): facing2,
    }


def ranks(j: Any, q: Any, k: Any) -> dict[str, Any]:
    """Round 1 entries by rank."""
    return {"J": j, "Q": q, "K": k}


def hands(pair: Any, j: Any, q: Any, k: Any) -> dict[str, Any]:
    """Round 2 entries: a pair with the public card, else by rank."""
    return {"pair": pair, "J": j, "Q": q, "K": k}


RAISE, CALL, FOLD = (1.0, 0.0), (0.0, 1.0), (0.0, 0.0)


@STRATEGIES
class LeducCFR(Strategy):
    """The equilibrium: CFR+'s average policy after 3,000 iterations on the exact tree
    (exploitability 3.7e-5 chips per hand, game value -0.0856 for the first to act)."""

    def probabilities(self, view: LeducView) -> dict[str, float]:
        """Returns the average policy at the information set ``view`` shows."""
        return dict(equilibrium()[key_of(view)])


@STRATEGIES
class RandomLegal(Strategy):
    """Plays each legal action with equal probability at every decision."""

    def probabilities(self, view: LeducView) -> dict[Act, float]:
        """Returns the uniform distribution over the legal actions."""
        return {a: 1 / len(view.legal) for a in view.legal}


@STRATEGIES
class TightPassive(TableStrategy):
    """Never raises. Answers a raise only with a K in round 1 and with a pair or a K in round 2;
    folds everything else to a raise."""

    table = table(
        ranks(0.0, 0.0, 0.0),
        ranks(FOLD, FOLD, CALL),
        hands(0.0, 0.0, 0.0, 0.0),
        hands(CALL, FOLD, FOLD, CALL),
    )


@STRATEGIES
class LooseAggressive(TableStrategy):
    """Raises Q and K and half its J in round 1, re-raises a raise with K and calls it with
    anything; in round 2 raises a pair or a K, half its Q and J, re-raises with a pair, calls
    with K or Q and folds an unpaired J."""

    table = table(
        ranks(0.5, 1.0, 1.0),
        ranks(CALL, CALL, RAISE),
        hands(1.0, 0.5, 0.5, 1.0),
        hands(RAISE, FOLD, CALL, CALL),
    )


@STRATEGIES
class TightAggressive(TableStrategy):
    """Raises only strong hands: a K in round 1, a pair or a K in round 2, and re-raises a raise
    with a K (round 1) or a pair (round 2); calls a round-1 raise with a Q and a round-2 raise
    with an unpaired K; folds the rest. It wins against loose play (``LooseAggressive``,
    ``RandomLegal``), which pays off its strong hands and bluffs into them."""

    table = table(
        ranks(0.0, 0.0, 1.0),
        ranks(FOLD, CALL, RAISE),
        hands(1.0, 0.0, 0.0, 1.0),
        hands(RAISE, FOLD, FOLD, CALL),
    )


@STRATEGIES
class CheckRaiser(TableStrategy):
    """Checks every hand and waits for the opponent to raise: re-raises with a K in round 1 and
    with a pair in round 2, calls a round-1 raise with a Q and a round-2 raise with an unpaired
    K, folds the rest. It wins against loose play, whose raises it traps."""

    table = table(
        ranks(0.0, 0.0, 0.0),
        ranks(FOLD, CALL, RAISE),
        hands(0.0, 0.0, 0.0, 0.0),
        hands(RAISE, FOLD, FOLD, CALL),
    )


@STRATEGIES
class AlwaysRaise(TableStrategy):
    """Raises whenever a raise is allowed, else calls; never folds."""

    table = table(
        ranks(1.0, 1.0, 1.0),
        ranks(RAISE, RAISE, RAISE),
        hands(1.0, 1.0, 1.0, 1.0),
        hands(RAISE, RAISE, RAISE, RAISE),
    )


@STRATEGIES
class AggressiveStation(TableStrategy):
    """A calling station that raises its strong hands: raises with a K (round 1) or with a pair
    or a K (round 2), checks the rest, and calls every raise it does not re-raise: it never
    folds."""

    table = table(
        ranks(0.0, 0.0, 1.0),
        ranks(CALL, CALL, RAISE),
        hands(1.0, 0.0, 0.0, 1.0),
        hands(RAISE, CALL, CALL, RAISE),
    )


@STRATEGIES
class PotControl(TableStrategy):
    """Keeps pots small: checks round 1 and calls a raise there with Q or K; in round 2 raises
    only a pair and calls a raise with a pair or a K; folds the rest."""

    table = table(
        ranks(0.0, 0.0, 0.0),
        ranks(FOLD, CALL, CALL),
        hands(1.0, 0.0, 0.0, 0.0),
        hands(CALL, FOLD, FOLD, CALL),
    )


@cache
def equilibrium() -> dict[str, dict[str, float]]:
    """Returns the shipped CFR+ average policy: information-set key -> {action: probability}.

    Raises ``ConfigError`` when the data file is missing or unreadable (a broken install).
    """
    try:
        text = resources.files("stratagem.strategies").joinpath("data", CFR_DATA).read_text()
        return json.loads(text)["policy"]
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"the Leduc equilibrium data {CFR_DATA} cannot be read: {exc}") from exc


POOLS = Pools(
    train=("LeducCFR", "TightPassive", "LooseAggressive"),
    exploit=("TightAggressive", "CheckRaiser"),
    collusive=(),
    robust=("RandomLegal", "AlwaysRaise", "AggressiveStation"),
)
SFT_MIXTURE = {
    "LeducCFR": 0.5,
    "PotControl": 0.2,
    "TightPassive": 0.15,
    "LooseAggressive": 0.1,
    "RandomLegal": 0.05,
}
