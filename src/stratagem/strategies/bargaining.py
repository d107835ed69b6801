"""Rule-based bargainers (SPEC §8): time-dependent concession tactics from the automated-
negotiation literature, a tit-for-tat concession mirror, and a naive accepter that violates IR.

Each plays either role. Time-dependent tactics offer ``anchor + (reservation − anchor)·(t/T)^(1/e)``
in round t of T: Boulware (e < 1) holds near its anchor until late, Conceder (e > 1) gives ground
early, Linear (e = 1) in between. Anchors: the seller asks max(1.5·cost, catalog high), the buyer
bids min(0.5·value, catalog low) — rule-based bargainers read the catalog's price range directly.
Each accepts the open offer when it is at least as good as what it would offer next, so none of
them (but the naive accepter) ever takes a deal below its reservation value.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from stratagem.agent import Strategy
from stratagem.games.bargaining import Call, Turn
from stratagem.games.bargaining.engine import BargainingView
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("bargaining strategy")
WAIT = Call("wait_for_response")
ACCEPT = Turn((Call("respond_to_offer", (("response", True),)),))


def offer(price: float) -> Turn:
    return Turn((Call("make_offer", (("price", round(price, 2)),)), WAIT))


def anchor(view: BargainingView) -> float:
    if view.role == "seller":
        return max(1.5 * view.reservation, view.high)
    return min(0.5 * view.reservation, view.low)


def good_enough(view: BargainingView, target: float) -> bool:
    """Whether the counterpart's open offer is at least as good as ``target``."""
    price = view.their_standing
    if price is None:
        return False
    return price >= target if view.role == "seller" else price <= target


class Bargainer(Strategy):
    def target(self, view: BargainingView) -> float:
        raise NotImplementedError

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        target = self.target(view)
        if not view.listing and good_enough(view, target):
            return ACCEPT
        return offer(target)


@dataclass(frozen=True)
class TimeDependent(Bargainer):
    e: float = 1.0

    def target(self, view: BargainingView) -> float:
        start = anchor(view)
        progress = min(view.round / view.max_rounds, 1.0) ** (1 / self.e)
        return start + (view.reservation - start) * progress


@STRATEGIES
@dataclass(frozen=True)
class Boulware(TimeDependent):
    """Holds near its anchor and concedes late (e = 0.2)."""

    e: float = 0.2


@STRATEGIES
@dataclass(frozen=True)
class Linear(TimeDependent):
    """Concedes the same amount every round (e = 1)."""

    e: float = 1.0


@STRATEGIES
@dataclass(frozen=True)
class Conceder(TimeDependent):
    """Gives ground early (e = 3)."""

    e: float = 3.0


@STRATEGIES
@dataclass(frozen=True)
class TitForTatConcession(Bargainer):
    """Mirrors the counterpart's last concession, opening at the anchor; before the counterpart
    has conceded it moves ``first_step`` of the way to its reservation value."""

    first_step: float = 0.1

    def target(self, view: BargainingView) -> float:
        if not view.my_offers:
            return anchor(view)
        last = view.my_offers[-1]
        theirs = view.their_offers
        if len(theirs) >= 2:
            step = abs(theirs[-1] - theirs[-2])
        else:
            step = self.first_step * abs(anchor(view) - view.reservation)
        if view.role == "seller":
            return max(last - step, view.reservation)
        return min(last + step, view.reservation)


@STRATEGIES
class NaiveAccepter(Bargainer):
    """Accepts whatever the other side offers, whatever it costs (violates IR); as seller it
    lists at the catalog high price."""

    def target(self, view: BargainingView) -> float:
        return view.high if view.role == "seller" else view.reservation

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        if view.their_standing is not None and not view.listing:
            return ACCEPT
        return offer(self.target(view))


POOLS = Pools(
    train=("Linear", "Conceder"),
    exploit=("Boulware",),
    collusive=(),
    robust=("TitForTatConcession", "NaiveAccepter"),
)
SFT_MIXTURE = {"Boulware": 0.3, "Linear": 0.3, "Conceder": 0.2, "TitForTatConcession": 0.2}
