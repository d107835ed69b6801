"""Rule-based Deal or No Deal negotiators (SPEC §7): baselines, test opponents and warm-start
demonstrators that act on the objective's λ and on the game's turn cap.

They speak the small language of ``strategies.dond.talk`` (claims, deals, values statements, in
several wordings drawn with the decision's seeded rng, never the writer's previous message
verbatim).

**λ.** Seat i is paid ``R_i + λ·R_j``. A negotiator scores a share ``s`` it would keep by its
*gain* ``score(own values, s) + λ·v̂_j(rest)``, where ``v̂_j`` are the other seat's values as it
infers them (``inferred_values``: the values the other last stated, else a flat prior of
10 / items per unit). Under λ = 1 the gain is the joint value, so a negotiator aiming at its best
gain proposes the joint-best division it can infer; under λ = −1 it is the margin over the other,
and a share with a negative gain is worse than no deal (both 0), so no negotiator accepts one; λ = 0
is in between (its own value only).

**Turn cap.** A seat can send ``budget`` messages before the cap (``max_turns``): the turns of its
parity below it. Its *progress* is its message index over ``budget − 1`` (1 on its last message,
and on forced proposals), so concession schedules fit any cap: under a 6-turn cap every
conceding negotiator concedes by its third message.

One protocol (``Negotiator.choose``), in order of precedence:

1. must propose (the other proposed, or the turn cap): propose the complement of the claim it
   accepted with its last message; else its own last claim when the other's last message
   accepted it; else the complement of the other's latest claim if acceptable; else its own last
   claim (what the other may have just accepted), else its demand;
2. the other's last message accepted its own last claim: propose that claim;
3. its own last message accepted a claim the other never proposed on: propose the complement;
4. the other's last message holds a claim it accepts: answer with a deal;
5. otherwise: a claim of its current demand.

A strategy is ``demand`` (the share it claims now) and ``accepts`` (whether a share offered to it
is good enough now); both are pure functions of the view, so a negotiator's moves are
deterministic and only its wording depends on the seed — except ``RandomNegotiator``, which draws
its moves from the seeded rng too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from stratagem.agent import Strategy
from stratagem.games.dond import (
    DondView,
    Items,
    Propose,
    Say,
    Turn,
    complement,
    divisions,
    score,
)
from stratagem.pools import Pools
from stratagem.registry import Registry
from stratagem.strategies.dond.talk import (
    CLAIMS,
    DEALS,
    claim_in,
    claim_text,
    compose,
    deal_in,
    deal_text,
    values_in,
    values_text,
    vary,
)

__all__ = [
    "HALF",
    "POOLS",
    "SFT_MIXTURE",
    "STRATEGIES",
    "Cooperative",
    "FairSplit",
    "Negotiator",
    "RandomNegotiator",
    "Stubborn",
    "ValueGreedy",
    "best_type",
    "budget",
    "claim_in",
    "claim_text",
    "deal_in",
    "deal_text",
    "gain",
    "inferred_values",
    "progress",
    "valued",
    "values_in",
    "values_text",
]

STRATEGIES: Registry[type[Strategy]] = Registry("dond strategy")
HALF = 5  # half of the pool's value to a seat (10 in all)
_EPS = 1e-9


def _last(messages: list[str]) -> str | None:
    return messages[-1] if messages else None


def _fits(view: DondView, share: Items | None) -> Items | None:
    """``share`` when it is a possible share of the pool, else None."""
    if share is None or any(x > n for x, n in zip(share, view.counts, strict=True)):
        return None
    return share


def their_claim(view: DondView) -> Items | None:
    """The share the other seat's last message claims for itself (a possible one), or None."""
    last = _last(view.their_messages())
    return None if last is None else _fits(view, claim_in(last))


def my_claim(view: DondView) -> Items | None:
    """The share this seat's last message claimed, or None."""
    last = _last(view.my_messages())
    return None if last is None else claim_in(last)


def my_deal(view: DondView) -> Items | None:
    """The other seat's share this seat accepted with its last message, or None."""
    last = _last(view.my_messages())
    return None if last is None else deal_in(last)


def they_accepted(view: DondView) -> Items | None:
    """This seat's last claim, when the other seat's last message accepted it, else None."""
    last, mine = _last(view.their_messages()), my_claim(view)
    if last is None or mine is None:
        return None
    return mine if deal_in(last) == mine else None


def inferred_values(view: DondView) -> tuple[float, float, float]:
    """The other seat's values as a negotiator infers them: the values its latest statement
    gives; else, when it claimed some items, its 10 points spread evenly over the units of its
    latest claim (it asks for what it values); else a flat prior (10 / the number of items per
    unit)."""
    claim = None
    for message in reversed(view.their_messages()):
        stated = values_in(message)
        if stated is not None:
            return (float(stated[0]), float(stated[1]), float(stated[2]))
        claim = claim or _fits(view, claim_in(message))
    if claim is not None and sum(claim) > 0:
        per = 10 / sum(claim)
        return (per if claim[0] else 0.0, per if claim[1] else 0.0, per if claim[2] else 0.0)
    flat = 10 / sum(view.counts)
    return (flat, flat, flat)


def their_value(view: DondView, share: Items) -> float:
    """The inferred value to the other seat of what is left when this seat keeps ``share``."""
    rest = complement(view.counts, share)
    return sum(v * n for v, n in zip(inferred_values(view), rest, strict=True))


def gain(view: DondView, share: Items) -> float:
    """This seat's objective if it keeps ``share``, as it can infer it: own value plus λ times the
    other's inferred value of the rest (module docstring); no deal gains 0."""
    return score(view.values, share) + view.lam * their_value(view, share)


def budget(view: DondView) -> int:
    """The messages this seat can send before the turn cap: the turns of its parity below it."""
    return (view.max_turns + 1) // 2 if view.first else view.max_turns // 2


def progress(view: DondView) -> float:
    """How far this seat is through its message budget: its message index over ``budget − 1``,
    at most 1 (1 on its last message, on forced proposals, and when it has one message)."""
    room = budget(view) - 1
    return 1.0 if room <= 0 else min(len(view.my_messages()) / room, 1.0)


def _key_best(view: DondView, share: Items) -> tuple:
    # highest gain; ties: most left to the other, fewer items, smallest (books, hats, balls)
    return (-round(gain(view, share), 9), -round(their_value(view, share), 9), sum(share), share)


def best_for_me(view: DondView) -> Items:
    """The share of highest gain (ties: most inferred value left to the other, fewer items,
    smallest): under λ = 0 every unit it values, under λ = 1 the joint-best division it infers,
    under λ = −1 everything."""
    return min(divisions(view.counts), key=lambda s: _key_best(view, s))


def valued(view: DondView) -> Items:
    """Every unit of every item type the seat values (worth 10 to it)."""
    return tuple(n if v > 0 else 0 for n, v in zip(view.counts, view.values, strict=True))  # type: ignore[return-value]


def best_type(view: DondView) -> int:
    """The item type with the highest value per unit (ties: higher total value, then books,
    hats, balls order)."""
    return max(range(3), key=lambda i: (view.values[i], view.values[i] * view.counts[i], -i))


def _lam_lines(view: DondView) -> tuple[str, ...]:
    if view.lam > 0.3:
        return ("", "We both gain from a good deal.", "A deal that is good for both of us is best.")
    if view.lam < -0.3:
        return ("", "Your gain is my loss here.", "I need the better side of this.")
    return ("",)


class Negotiator(Strategy):
    """The shared protocol (module docstring); subclasses define ``demand`` and ``accepts``."""

    def demand(self, view: DondView) -> Items:
        """Returns the share this negotiator claims now."""
        raise NotImplementedError

    def accepts(self, view: DondView, share: Items) -> bool:
        """Returns whether receiving ``share`` is good enough now."""
        raise NotImplementedError

    def preambles(self, view: DondView) -> tuple[str, ...]:
        """Returns what a claim message may say before the claim (empty: nothing)."""
        return ("",)

    def choose(self, view: DondView, rng: random.Random) -> Turn:
        """Returns the turn the protocol of the module docstring prescribes."""
        counts = view.counts
        theirs = their_claim(view)
        acceptable = theirs is not None and self.accepts(view, complement(counts, theirs))
        dealt = my_deal(view)
        confirmed = they_accepted(view)
        if view.must_propose:
            if dealt is not None:
                return Propose(complement(counts, dealt))
            if confirmed is not None:
                return Propose(confirmed)
            if acceptable:
                return Propose(complement(counts, theirs))  # type: ignore[arg-type]
            return Propose(_fits(view, my_claim(view)) or self.demand(view))
        if confirmed is not None:
            return Propose(confirmed)
        if dealt is not None:
            return Propose(complement(counts, dealt))
        last = _last(view.my_messages())
        if acceptable:
            mine = complement(counts, theirs)  # type: ignore[arg-type]
            deals = [deal_text(theirs, mine, i) for i in range(len(DEALS))]  # type: ignore[arg-type]
            return Say(vary(deals, last, rng))
        share = self.demand(view)
        rest = complement(counts, share)
        bodies = [claim_text(share, rest, i) for i in range(len(CLAIMS))]
        lines = compose(self.preambles(view), _lam_lines(view))
        return Say(vary(compose(lines, bodies), last, rng))


@STRATEGIES
@dataclass(frozen=True)
class ValueGreedy(Negotiator):
    """A hard-liner with a deadline. Until its concession message — its ``k``-th, or its last
    before the turn cap if that comes sooner (``min(k, budget − 1)``, 0-based) — it claims the
    share of highest gain (``best_for_me``: under λ = 0 every unit it values, under λ = 1 the
    joint-best division it infers, under λ = −1 everything) and accepts nothing. From then on it
    claims its concession share — the share of highest gain among those leaving the other at
    least the inferred value that all units of its best type (``best_type``) leave — and accepts
    any share whose gain is at least that share's and not below no deal (0)."""

    k: int = 4

    def _conceding(self, view: DondView) -> bool:
        return len(view.my_messages()) >= min(self.k, budget(view) - 1)

    def _concession(self, view: DondView) -> Items:
        best = best_type(view)
        core: Items = tuple(n if i == best else 0 for i, n in enumerate(view.counts))  # type: ignore[assignment]
        floor = their_value(view, core) - _EPS
        options = [s for s in divisions(view.counts) if their_value(view, s) >= floor]
        return min(options, key=lambda s: _key_best(view, s))

    def demand(self, view: DondView) -> Items:
        """Its share of highest gain, or from its concession message on its concession share."""
        return self._concession(view) if self._conceding(view) else best_for_me(view)

    def accepts(self, view: DondView, share: Items) -> bool:
        """From its concession message on: a share of gain at least its concession share's and
        at least 0; before: none."""
        if not self._conceding(view):
            return False
        g = gain(view, share)
        return g >= -_EPS and g >= gain(view, self._concession(view)) - _EPS

    def preambles(self, view: DondView) -> tuple[str, ...]:
        """A firm opening, or a word on giving ground once conceding."""
        if self._conceding(view):
            return (
                "I can give some ground.",
                "Let me meet you partway.",
                "I will settle for less.",
            )
        return ("", "These are the items I care about.")


@STRATEGIES
@dataclass(frozen=True)
class FairSplit(Negotiator):
    """Aims at an even split of its own value. Under λ ≤ 0 it claims the share whose value to
    itself is closest to half (5), ties broken by keeping fewer items, then by the smallest
    (books, hats, balls); under λ > 0, among the shares within ``slack`` of half (or the closest
    ones), the one leaving the most joint value it infers (own value plus the other's inferred
    value of the rest), then the same ties. It accepts a share worth at least ``5 − allowance``
    to it whose gain is not below no deal, where ``allowance = slack·(1 + λ)`` (λ = −1: exactly
    half; λ = 1: twice the slack), one more on its last message and forced proposals when
    λ ≥ 0."""

    slack: int = 1

    def demand(self, view: DondView) -> Items:
        """The share worth closest to 5 to itself (λ > 0: the jointly best of the near ones)."""
        shares = list(divisions(view.counts))

        def gap(s: Items) -> float:
            return abs(score(view.values, s) - HALF)

        if view.lam <= 0:
            return min(shares, key=lambda s: (gap(s), sum(s), s))
        near = max(self.slack, min(gap(s) for s in shares))
        joint = [s for s in shares if gap(s) <= near]
        return min(
            joint,
            key=lambda s: (
                -round(score(view.values, s) + their_value(view, s), 9),
                gap(s),
                sum(s),
                s,
            ),
        )

    def accepts(self, view: DondView, share: Items) -> bool:
        """Whether ``share`` is worth at least ``5 − allowance`` to it and gains at least 0."""
        allowance = self.slack * (1 + view.lam)
        if view.lam >= 0 and progress(view) >= 1:
            allowance += 1
        return score(view.values, share) >= HALF - allowance - _EPS and gain(view, share) >= -_EPS

    def preambles(self, view: DondView) -> tuple[str, ...]:
        """A word on fairness."""
        return (
            "Let us split this fairly.",
            "A fair split works best for both of us.",
            "Half each seems right to me.",
        )


@STRATEGIES
@dataclass(frozen=True)
class Cooperative(Negotiator):
    """States its values in every claim and claims the division of highest weighted welfare it
    can infer: its own value plus ``ω = min(1, 1 + λ)`` times the other's inferred value of the
    rest (λ ≥ 0: the joint-best division; λ = −1: its own value only), ties broken by the
    smallest gap between the two, then by keeping fewer items, then by the smallest (books, hats,
    balls). It accepts the shares whose division has the highest weighted welfare under the same
    inference (within 1 on its last message and forced proposals, when λ ≥ 0) and whose gain is
    not below no deal."""

    def _weight(self, view: DondView) -> float:
        return min(1.0, 1.0 + view.lam)

    def _welfare(self, view: DondView, share: Items) -> float:
        return score(view.values, share) + self._weight(view) * their_value(view, share)

    def demand(self, view: DondView) -> Items:
        """The share of highest weighted welfare (ties: smallest gap, fewer items, smallest)."""
        w = self._weight(view)

        def key(s: Items) -> tuple:
            mine, other = score(view.values, s), w * their_value(view, s)
            return (-round(mine + other, 9), round(abs(mine - other), 9), sum(s), s)

        return min(divisions(view.counts), key=key)

    def accepts(self, view: DondView, share: Items) -> bool:
        """Whether the division giving it ``share`` has the highest inferred weighted welfare
        (within 1 at the deadline when λ ≥ 0) and ``share`` gains at least 0."""
        best = self._welfare(view, self.demand(view))
        tolerance = 1.0 if view.lam >= 0 and progress(view) >= 1 else 0.0
        return self._welfare(view, share) >= best - tolerance - _EPS and gain(view, share) >= -_EPS

    def preambles(self, view: DondView) -> tuple[str, ...]:
        """Its values, stated openly, in one of several wordings."""
        return tuple(values_text(view.values, i) for i in range(3))


@STRATEGIES
@dataclass(frozen=True)
class Stubborn(Negotiator):
    """Claims its share of highest gain (``best_for_me``: under λ = 0 every unit it values, under
    λ = 1 the joint-best division it infers, under λ = −1 everything) in every message, never
    accepts a claim, and proposes its last claim whenever it proposes."""

    def demand(self, view: DondView) -> Items:
        """Its share of highest gain."""
        return best_for_me(view)

    def accepts(self, view: DondView, share: Items) -> bool:
        """Never."""
        return False

    def preambles(self, view: DondView) -> tuple[str, ...]:
        """A word of warning."""
        return ("I will not move on this.", "This is my final word.", "I am not changing my mind.")


@STRATEGIES
class RandomNegotiator(Strategy):
    """Plays uniformly random turns, ignoring its values and λ: a random share when a proposal is
    due; otherwise (once a message was sent) a random share with probability 1/4, else a message
    drawn uniformly from a random claim, a random deal and three fixed lines."""

    def choose(self, view: DondView, rng: random.Random) -> Turn:
        """Returns a random valid turn (class docstring)."""
        share: Items = tuple(rng.randint(0, n) for n in view.counts)  # type: ignore[assignment]
        if view.must_propose or (view.discussed and rng.random() < 0.25):
            return Propose(share)
        rest = complement(view.counts, share)
        lines = (
            claim_text(share, rest),
            deal_text(share, rest),
            "Hello. What matters most to you?",
            "I am not sure about that.",
            "Let us find something that works for both of us.",
        )
        return Say(rng.choice(lines))


POOLS = Pools(
    train=("FairSplit", "Cooperative"),
    exploit=("ValueGreedy", "Stubborn"),
    collusive=(),
    robust=("RandomNegotiator",),
)
SFT_MIXTURE = {"FairSplit": 0.4, "Cooperative": 0.4, "ValueGreedy": 0.2}
