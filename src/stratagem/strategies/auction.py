"""Rule-based auction strategies, pools and SFT mixture (SEPO §4, App. F, H)."""

from __future__ import annotations

from stratagem.agent import Strategy, pure
from stratagem.games.auction import AMOUNT, BID_FOR_AMOUNT, AuctionView, Bid
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("auction strategy")


def truthful(value: int) -> Bid:
    """Returns the value bid: MEDIUM for value 2, HIGH for value 4."""
    return Bid.MEDIUM if value == 2 else Bid.HIGH


@STRATEGIES
class Truthful(Strategy):
    """Bid by value: 2 → MEDIUM, 4 → HIGH (the paper's ValueBid)."""

    def probabilities(self, view: AuctionView):
        """Returns MEDIUM for sure with value 2, HIGH with value 4."""
        return pure(truthful(view.value))


@STRATEGIES
class AggressiveValue(Strategy):
    """Truthful (2 → MEDIUM, 4 → HIGH), but HIGH right after a round the opponent outbid it.

    Outbid means a strictly higher bid: a tie is not a loss.
    """

    def probabilities(self, view: AuctionView):
        """Returns HIGH for sure after a lost round, else the Truthful bid."""
        return pure(Bid.HIGH if view.lost() else truthful(view.value))


@STRATEGIES
class Adaptive(Strategy):
    """One step above the opponent's last bid while that leaves a non-negative profit, else LOW.

    The step is LOW → MEDIUM or MEDIUM → HIGH, taken when its amount is at most this round's
    value; after an opponent's HIGH there is no step above, so it bids LOW. With no history there
    is no bid to step over: it opens LOW.
    """

    def probabilities(self, view: AuctionView):
        """Returns for sure the bid one step above the opponent's last bid when it exists and is at
        most ``view.value``, else LOW.
        """
        if not view.theirs:
            return pure(Bid.LOW)
        step = AMOUNT[view.theirs[-1]] + 1
        return pure(
            BID_FOR_AMOUNT[step] if step in BID_FOR_AMOUNT and step <= view.value else Bid.LOW
        )


@STRATEGIES
class Conservative(Strategy):
    """Always LOW, except MEDIUM with value 4 right after a round the opponent outbid it."""

    def probabilities(self, view: AuctionView):
        """Returns MEDIUM for sure with value 4 after a lost round, else LOW."""
        return pure(Bid.MEDIUM if view.value == 4 and view.lost() else Bid.LOW)


@STRATEGIES
class Shaded(Strategy):
    """Bid value − 1: 2 → LOW, 4 → HIGH."""

    def probabilities(self, view: AuctionView):
        """Returns LOW for sure with value 2, HIGH with value 4."""
        return pure(Bid.LOW if view.value == 2 else Bid.HIGH)


@STRATEGIES
class AggressiveBid(Strategy):
    """Bids HIGH every round, whatever its value."""

    def probabilities(self, view: AuctionView):
        """Returns HIGH for sure."""
        return pure(Bid.HIGH)


@STRATEGIES
class CollusiveLow(Strategy):
    """Bids LOW every round, whatever its value."""

    def probabilities(self, view: AuctionView):
        """Returns LOW for sure."""
        return pure(Bid.LOW)


@STRATEGIES
class Random(Strategy):
    """Bids LOW, MEDIUM or HIGH with probability 1/3 each, every round."""

    def probabilities(self, view: AuctionView):
        """Returns each bid with probability 1/3."""
        return {b: 1 / 3 for b in Bid}


POOLS = Pools(
    train=("Truthful", "Adaptive", "Conservative"),
    exploit=("AggressiveBid", "Shaded"),
    collusive=("CollusiveLow",),
    robust=("Random", "AggressiveValue"),
)
SFT_MIXTURE = {"Truthful": 0.44, "AggressiveValue": 0.28, "Adaptive": 0.20, "Random": 0.08}
