"""Rule-based strategies for multi-issue negotiation v2, pools and SFT mixture (SEPO App. F, H).

SPEC names the demonstrators ``Proportional``, ``Conservative``, ``Adaptive`` and ``Defensive``
without defining them; the definitions here are ours and are stated in each docstring.
"""

from __future__ import annotations

import itertools
import random

from stratagem.agent import Strategy
from stratagem.games.multi_issue import VALUE_TOTAL, MultiIssueView, Vector, fits
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("multi_issue strategy")
AVERAGE_VALUE = VALUE_TOTAL / 3


def fair(pool: Vector) -> Vector:
    """Returns half of each item of ``pool``, rounded down."""
    return tuple(p // 2 for p in pool)  # type: ignore[return-value]


def by_value(values: Vector) -> list[int]:
    """Item indices from the most to the least valued (ties: lower index first)."""
    return sorted(range(3), key=lambda i: (-values[i], i))


def keep(pool: Vector, items: list[int]) -> Vector:
    """All of ``items``, none of the rest."""
    return tuple(p if i in items else 0 for i, p in enumerate(pool))  # type: ignore[return-value]


class Deterministic(Strategy):
    """A strategy that plays one vector: ``demand`` is its rule."""

    def demand(self, view: MultiIssueView) -> Vector:
        """Returns the vector this strategy demands at ``view``."""
        raise NotImplementedError

    def probabilities(self, view: MultiIssueView):
        """Returns ``demand(view)`` for sure."""
        return {self.demand(view): 1.0}


@STRATEGIES
class FairNeg(Deterministic):
    """Half of every item, rounded down, every round."""

    def demand(self, view):
        """Returns half of every item, rounded down."""
        return fair(view.pool)


@STRATEGIES
class TFTNeg(Deterministic):
    """Fair first, then whatever the opponent's last demand left of each item (pool − it)."""

    def demand(self, view):
        """Returns the fair split in round 1, else the pool minus the opponent's last demand."""
        if not view.theirs:
            return fair(view.pool)
        return tuple(max(p - t, 0) for p, t in zip(view.pool, view.theirs[-1], strict=True))


@STRATEGIES
class ConcedeNeg(Deterministic):
    """All of its two most valued items, then one unit less each round (least valued first).

    Each round after the first it gives up one unit of the less valued of the two until none is
    left, then of the more valued; it never demands the third item. Equal values rank the lower
    item index first.
    """

    def demand(self, view):
        """Returns its two most valued items in full, less one unit per round played so far (the
        less valued of the two first).
        """
        order = by_value(view.values)
        demand = list(keep(view.pool, order[:2]))
        for _ in range(view.round):
            for i in reversed(order[:2]):
                if demand[i] > 0:
                    demand[i] -= 1
                    break
        return tuple(demand)


@STRATEGIES
class GreedyNeg(Deterministic):
    """The whole pool, every round."""

    def demand(self, view):
        """Returns the whole pool."""
        return view.pool


@STRATEGIES
class HardballNeg(Deterministic):
    """All of its two most valued items, none of the third, every round."""

    def demand(self, view):
        """Returns all of its two most valued items and none of the third."""
        return keep(view.pool, by_value(view.values)[:2])


@STRATEGIES
class GenerousNeg(Deterministic):
    """All of its single most valued item and nothing else, every round."""

    def demand(self, view):
        """Returns all of its single most valued item and nothing else."""
        return keep(view.pool, by_value(view.values)[:1])


@STRATEGIES
class Proportional(Deterministic):
    """Of each item, the share ``v / (v + 10/3)`` of the pool, rounded half up (v: its value).

    That is half when its value is average, more when it values the item more, nothing when it
    is worthless to it; the same every round.
    """

    def demand(self, view):
        """Returns ``round(p · v / (v + 10/3))`` of each item, halves rounded up."""
        return tuple(
            int(p * v / (v + AVERAGE_VALUE) + 0.5)
            for p, v in zip(view.pool, view.values, strict=True)
        )


@STRATEGIES
class Conservative(Deterministic):
    """Half (rounded down) of the items it values at least average (≥ 10/3), none of the rest."""

    def demand(self, view):
        """Returns half (rounded down) of each item it values at least 10/3, none of the rest."""
        return tuple(
            p // 2 if v >= AVERAGE_VALUE else 0 for p, v in zip(view.pool, view.values, strict=True)
        )


@STRATEGIES
class Adaptive(Deterministic):
    """Fair first, then its own last demand adjusted by one unit after each round's outcome.

    After a breakdown, one unit less of its least valued demanded item; after a deal that left
    units of its most valued item unclaimed (and that item is worth something to it), one unit
    more of it; else it repeats its last demand.
    """

    def demand(self, view):
        """Returns the fair split in round 1, else its last demand adjusted by the last round's
        outcome.
        """
        if not view.mine:
            return fair(view.pool)
        last, theirs = list(view.mine[-1]), view.theirs[-1]
        order = by_value(view.values)
        if not fits(view.mine[-1], theirs, view.pool):
            for i in reversed(order):
                if last[i] > 0:
                    last[i] -= 1
                    break
        else:
            top = order[0]
            if view.values[top] > 0 and last[top] + theirs[top] < view.pool[top]:
                last[top] += 1
        return tuple(last)


@STRATEGIES
class Defensive(Deterministic):
    """Half (rounded down) of every item it values, none of worthless items, every round.

    It never concedes below that, whatever the opponent does.
    """

    def demand(self, view):
        """Returns half (rounded down) of each item it values, none of worthless items."""
        return tuple(p // 2 if v > 0 else 0 for p, v in zip(view.pool, view.values, strict=True))


@STRATEGIES
class Random(Strategy):
    """A uniformly random legal demand."""

    def choose(self, view: MultiIssueView, rng: random.Random) -> Vector:
        """Returns a uniformly random legal demand, one ``randint`` per item (the distribution of
        ``probabilities``, without listing every vector).
        """
        return tuple(rng.randint(0, p) for p in view.pool)  # type: ignore[return-value]

    def probabilities(self, view: MultiIssueView):
        """Returns every legal demand vector with equal probability."""
        vectors = list(itertools.product(*(range(p + 1) for p in view.pool)))
        return {v: 1 / len(vectors) for v in vectors}


POOLS = Pools(
    train=("FairNeg", "TFTNeg", "ConcedeNeg"),
    exploit=("GreedyNeg", "HardballNeg"),
    collusive=("GenerousNeg",),
    robust=("Random", "Proportional"),
)
SFT_MIXTURE = {"Proportional": 0.35, "Conservative": 0.25, "Adaptive": 0.25, "Defensive": 0.15}
