"""Rule-based bargainers (SPEC §8): time-dependent concession tactics from the automated-
negotiation literature, a tit-for-tat concession mirror, and a naive accepter that violates IR.

Each plays either role. Time-dependent tactics (Faratin et al.) offer
``anchor + (reservation − anchor)·(t/T)^(1/e)`` where t = round − 1 counts the rounds before this
one and T = max_rounds − 1, so the offer reaches the reservation value in the last round: Boulware
(e < 1) holds near its anchor until late, Conceder (e > 1) gives ground early, Linear (e = 1) in
between. Anchors: the seller asks max(1.5·cost, historical high), the buyer bids min(0.5·value,
historical low) — both parties see the item's historical price range. Each accepts the open offer
when it is at least as good as what it would offer now, and otherwise rejects it and counters in
the same turn, so none of them (but the naive accepter) ever takes a deal below its reservation
value, and their offers are monotonic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from stratagem.agent import Strategy
from stratagem.games.bargaining import BargainingView, Call, Turn
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("bargaining strategy")
WAIT = Call("wait_for_response")
ACCEPT = Turn((Call("respond_to_offer", (("response", True),)),))
REJECT = Call("respond_to_offer", (("response", False),))


def offer(price: float, view: BargainingView | None = None) -> Turn:
    """Returns a turn offering ``price``, rejecting the counterpart's open offer first (reject
    and counter) when ``view`` shows one."""
    make = Call("make_offer", (("price", round(price, 2)),))
    if view is not None and view.their_standing is not None and not view.listing:
        return Turn((REJECT, make, WAIT))
    return Turn((make, WAIT))


def anchor(view: BargainingView) -> float:
    """Returns the opening price: the seller's ask or the buyer's first bid."""
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
    """Offers ``target(view)``; accepts an open offer at least as good as that."""

    def target(self, view: BargainingView) -> float:
        """Returns the price this bargainer would offer now."""
        raise NotImplementedError

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        """Returns acceptance of a good-enough open offer, else reject-and-counter at target."""
        target = self.target(view)
        if not view.listing and good_enough(view, target):
            return ACCEPT
        return offer(target, view)


@dataclass(frozen=True)
class TimeDependent(Bargainer):
    """Concedes from its anchor to its reservation value as (t/T)^(1/e) (Faratin et al.)."""

    e: float = 1.0

    def target(self, view: BargainingView) -> float:
        """Returns the anchor moved (t/T)^(1/e) of the way to the reservation value."""
        start = anchor(view)
        t, horizon = view.round - 1, max(view.max_rounds - 1, 1)
        progress = min(t / horizon, 1.0) ** (1 / self.e)
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
        """Returns the last own offer moved by the counterpart's last concession."""
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
        """Returns the historical high (seller) or its own reservation value (buyer)."""
        return view.high if view.role == "seller" else view.reservation

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        """Returns acceptance of any open offer, else an offer at target."""
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
