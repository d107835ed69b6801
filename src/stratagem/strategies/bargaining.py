"""Rule-based bargainers (SPEC §8): time-dependent concession tactics from the automated-
negotiation literature, a tit-for-tat concession mirror, a reservation-price responder (whose
thoughts put each offer beside its value and name the relation, for demonstrations a small model
can copy), a zero-intelligence trader (random prices within its budget), and a naive accepter
that violates IR.

Each plays either role. Time-dependent tactics (Faratin et al.) offer
``anchor + (reservation − anchor)·(t/T)^(1/e)`` where t counts the bargainer's own turns before
this one and T + 1 is the number of its own turns in the negotiation (``own_turns``): a round is
one party's turn, so a bargainer's deadline is its **own last turn** (the seller's is round 9 of
10, the buyer's round 10), and its offer reaches its reservation value there — the seller's while
the buyer can still accept it. Boulware (e < 1) holds near its anchor until late, Conceder (e > 1)
gives ground early, Linear (e = 1) in between. The tit-for-tat mirror has the same deadline: on
its own last turn it offers its reservation value. So two of them close a deal inside the ZOPA
whenever there is one, and never deal without one (NGFT).

Anchors: the seller asks max(1.5·cost, historical high), the buyer bids min(0.5·value, historical
low) — both parties see the item's historical price range. Each accepts the open offer when it is
at least as good as what it would offer now, and otherwise rejects it and counters in the same
turn, so none of them (but the naive accepter) ever takes a deal below its reservation value, and
their offers are monotonic.

Every turn carries a templated ``Thought`` that states the reason for the choice from the view
(the open offer, the price aimed at, the round, the tactic), so a rule-based seat's answer
(``Bargaining.answer_text``) is a ``Thought:``/``Code:`` demonstration an LLM can be trained on
(SPEC §8, Training). The thought never changes the calls.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from stratagem.agent import Strategy
from stratagem.games.bargaining import BargainingView, Call, Turn
from stratagem.games.bargaining.prompts import money
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("bargaining strategy")
WAIT = Call("wait_for_response")
REJECT = Call("respond_to_offer", (("response", False),))


def accept(thought: str = "") -> Turn:
    """Returns a turn that accepts the counterpart's open offer."""
    return Turn((Call("respond_to_offer", (("response", True),)),), thought)


def offer(price: float, view: BargainingView | None = None, thought: str = "") -> Turn:
    """Returns a turn offering ``price``, rejecting the counterpart's open offer first (reject
    and counter) when ``view`` shows one."""
    make = Call("make_offer", (("price", round(price, 2)),))
    if view is not None and view.their_standing is not None and not view.listing:
        return Turn((REJECT, make, WAIT), thought)
    return Turn((make, WAIT), thought)


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


def other(view: BargainingView) -> str:
    """Returns the counterpart's role."""
    return "buyer" if view.role == "seller" else "seller"


def own_turns(view: BargainingView) -> tuple[int, int]:
    """Returns (the bargainer's own turns before this one, its own turns after this one): the
    seller lists in round 1 and the parties alternate, so the seller's turns are the odd rounds
    and the buyer's the even ones, up to ``max_rounds``."""
    first = 1 if view.role == "seller" else 2
    return max(view.round - first, 0) // 2, max(view.max_rounds - view.round, 0) // 2


def gain(view: BargainingView, price: float) -> float:
    """Returns this seat's utility of a deal at ``price``."""
    return price - view.reservation if view.role == "seller" else view.reservation - price


class Bargainer(Strategy):
    """Offers ``target(view)``; accepts an open offer at least as good as that."""

    def target(self, view: BargainingView) -> float:
        """Returns the price this bargainer would offer now."""
        raise NotImplementedError

    def tactic(self, view: BargainingView) -> str:
        """Returns how this bargainer moves its price, as a clause of its thought."""
        raise NotImplementedError

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        """Returns acceptance of a good-enough open offer, else reject-and-counter at target."""
        target = self.target(view)
        if not view.listing and good_enough(view, target):
            price = view.their_standing
            assert price is not None
            side = "above" if view.role == "seller" else "below"
            return accept(
                f"The {other(view)}'s offer of {money(price)} is at least as good as the "
                f"{money(target)} I would propose in round {view.round} of {view.max_rounds}, "
                f"and {money(gain(view, price))} {side} my reservation value of "
                f"{money(view.reservation)}: I accept."
            )
        return offer(target, view, self.offer_thought(view, target))

    def offer_thought(self, view: BargainingView, target: float) -> str:
        """Returns the reason for offering ``target`` now (and refusing the open offer)."""
        price = None if view.listing else view.their_standing
        head = "I "
        if price is not None:
            worse = "less than I would accept" if view.role == "seller" else "more than I would pay"
            head = (
                f"The {other(view)}'s offer of {money(price)} is {worse} now, so I reject it and "
            )
        if not view.my_offers:
            side = "above" if view.role == "seller" else "below"
            return (
                f"{head}open at {money(target)}, well {side} my reservation value of "
                f"{money(view.reservation)}, to leave room to concede."
            )
        verb = "offer" if price is None else "counter at"
        return (
            f"{head}{verb} {money(target)} in round {view.round} of {view.max_rounds}; "
            f"{self.tactic(view)}."
        )


@dataclass(frozen=True)
class TimeDependent(Bargainer):
    """Concedes from its anchor to its reservation value as (t/T)^(1/e) (Faratin et al.)."""

    e: float = 1.0
    concedes: ClassVar[str] = "I move from my opening price to my reservation value over the rounds"

    def target(self, view: BargainingView) -> float:
        """Returns the anchor moved (t/T)^(1/e) of the way to the reservation value: t own turns
        taken, T = t + own turns left, so the reservation value on the own last turn (even when
        it is the first: a single turn is the deadline)."""
        start = anchor(view)
        taken, left = own_turns(view)
        progress = (taken / (taken + left)) ** (1 / self.e) if left else 1.0
        return start + (view.reservation - start) * progress

    def tactic(self, view: BargainingView) -> str:
        """Returns the tactic's concession rule in words."""
        return self.concedes


@STRATEGIES
@dataclass(frozen=True)
class Boulware(TimeDependent):
    """Holds near its anchor and concedes late (e = 0.2)."""

    e: float = 0.2
    concedes: ClassVar[str] = (
        "I concede slowly and hold near my opening price until the last rounds"
    )


@STRATEGIES
@dataclass(frozen=True)
class Linear(TimeDependent):
    """Concedes the same amount every round (e = 1)."""

    e: float = 1.0
    concedes: ClassVar[str] = "I concede the same amount every round"


@STRATEGIES
@dataclass(frozen=True)
class Conceder(TimeDependent):
    """Gives ground early (e = 3)."""

    e: float = 3.0
    concedes: ClassVar[str] = "I give ground early to reach a deal"


@STRATEGIES
@dataclass(frozen=True)
class TitForTatConcession(Bargainer):
    """Mirrors the counterpart's last concession, opening at the anchor; before the counterpart
    has conceded it moves ``first_step`` of the way to its reservation value. Its deadline is its
    own last turn, where it offers its reservation value."""

    first_step: float = 0.1

    def target(self, view: BargainingView) -> float:
        """Returns the last own offer moved by the counterpart's last concession (on the own
        last turn: the reservation value)."""
        if not view.my_offers:
            return anchor(view)
        if own_turns(view)[1] == 0:
            return view.reservation
        last = view.my_offers[-1]
        if len(view.their_offers) >= 2:
            step = self.mirrored(view)
        else:
            step = self.first_step * abs(anchor(view) - view.reservation)
        if view.role == "seller":
            return max(last - step, view.reservation)
        return min(last + step, view.reservation)

    def mirrored(self, view: BargainingView) -> float:
        """Returns the counterpart's last concession (the size of its last price move)."""
        return abs(view.their_offers[-1] - view.their_offers[-2])

    def tactic(self, view: BargainingView) -> str:
        """Returns the concession being mirrored, or the first step before there is one."""
        if own_turns(view)[1] == 0:
            return "this is my last turn, so I offer my reservation value"
        if len(view.their_offers) >= 2:
            return f"I match the {other(view)}'s last concession of {money(self.mirrored(view))}"
        return (
            f"until the {other(view)} concedes I move {self.first_step:.0%} of the way to my "
            "reservation value"
        )


@STRATEGIES
class NaiveAccepter(Bargainer):
    """Accepts whatever the other side offers, whatever it costs (violates IR); as seller it
    lists at the catalog high price."""

    def target(self, view: BargainingView) -> float:
        """Returns the historical high (seller) or its own reservation value (buyer)."""
        return view.high if view.role == "seller" else view.reservation

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        """Returns acceptance of any open offer, else an offer at target."""
        price = view.their_standing
        if price is not None and not view.listing:
            loss = -gain(view, price)
            cost = f", even though it costs me {money(loss)}" if loss > 0 else ""
            return accept(
                f"The {other(view)} offers {money(price)}. I accept any offer to close the "
                f"deal{cost}."
            )
        target = self.target(view)
        what = "the historical high" if view.role == "seller" else "my reservation value"
        return offer(target, thought=f"I offer {what} of {money(target)}.")

    def tactic(self, view: BargainingView) -> str:
        """Returns the naive accepter's rule in words."""
        return "I accept whatever the other side offers"


@STRATEGIES
class ZeroIntelligence(Bargainer):
    """A zero-intelligence trader constrained by its budget (ZI-C, Gode and Sunder 1993): each
    turn it draws a price uniformly between its reservation value and the far end of the
    historical range (a seller up to max(high, value), a buyer down to min(low, value)), accepts
    an open offer at least as good as that price and otherwise offers it. It never deals beyond
    its value, and its offers fall on both sides of the other party's value, so a counterpart
    meets offers it should accept and offers it should refuse."""

    def target(self, view: BargainingView) -> float:
        """Returns the middle of its price interval (the draw's mean; ``choose`` draws)."""
        return sum(self.interval(view)) / 2

    def interval(self, view: BargainingView) -> tuple[float, float]:
        """Returns the interval its prices are drawn from."""
        if view.role == "seller":
            return view.reservation, max(view.high, view.reservation)
        return min(view.low, view.reservation), view.reservation

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        """Returns acceptance of an open offer at least as good as a fresh draw, else an offer
        at the draw."""
        price = round(rng.uniform(*self.interval(view)), 2)
        if not view.listing and good_enough(view, price):
            return accept(
                f"The {other(view)}'s offer is at least as good as {money(price)}: I accept."
            )
        return offer(
            price, view, f"I offer {money(price)}, a price drawn at random within my budget."
        )

    def tactic(self, view: BargainingView) -> str:
        """Returns the zero-intelligence rule in words."""
        return "I draw each price at random within my budget"


@STRATEGIES
class ReservationPrice(Bargainer):
    """A reservation-price responder: as a seller it lists at its reservation value; after that
    it never offers, only answers — it accepts an open offer at least as good as its reservation
    value and rejects any other without countering. It never deals beyond its value, every
    number it writes is one it was given or has just read, and its thought puts each open offer
    beside its reservation value and names the relation ("so the offer is lower") before it
    answers, so the one computation a demonstration needs is a single word after the two prices
    it has just written (``experiments/drills/bargaining.py`` drills exactly that word)."""

    def target(self, view: BargainingView) -> float:
        """Returns its reservation value."""
        return view.reservation

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        """Returns a listing at its value, acceptance of an open offer at least as good as its
        value, a rejection of any other, or a wait when nothing is open."""
        if view.listing:
            return offer(
                view.reservation,
                view,
                f"I list the item at my reservation value of {money(view.reservation)}.",
            )
        price = view.their_standing
        if price is None:
            return Turn((WAIT,), "There is no open offer to answer, so I wait.")
        better = "higher" if view.role == "seller" else "lower"
        relation = (
            "the same"
            if price == view.reservation
            else ("lower" if price < view.reservation else "higher")
        )
        head = (
            f"The {other(view)} offers {money(price)}; my reservation value is "
            f"{money(view.reservation)}, so the offer is {relation}. As the {view.role} I accept "
            f"a price that is {better} or the same"
        )
        if good_enough(view, view.reservation):
            return accept(f"{head}: I accept.")
        return Turn((REJECT, WAIT), f"{head}, so I reject it.")

    def tactic(self, view: BargainingView) -> str:
        """Returns the reservation-price rule in words."""
        return "I answer offers and never make my own"


POOLS = Pools(
    train=("Linear", "Conceder"),
    exploit=("Boulware",),
    collusive=(),
    robust=("TitForTatConcession", "NaiveAccepter"),
)
SFT_MIXTURE = {"Boulware": 0.3, "Linear": 0.3, "Conceder": 0.2, "TitForTatConcession": 0.2}
