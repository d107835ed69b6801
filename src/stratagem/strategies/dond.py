"""Rule-based Deal or No Deal negotiators (SPEC §7): baselines, test opponents and warm-start
demonstrators, each writing short templated messages and exact proposals.

Every negotiator speaks one small language:

- a **claim** ``I ask for (x books, y hats, z balls); you get the rest.`` — the share it wants;
- a **deal** ``Deal: you get (x books, y hats, z balls) and I get the rest.`` — it accepts the
  other seat's latest claim;
- the cooperative negotiator also states its values: ``My values: a book is worth 2, a hat 1, a
  ball 3.``

Claims are also read, more loosely, from free text (``I want (1 books, 2 hats, 0 balls)``,
``I'd take 1 book, 2 hats and 0 balls``), so the negotiators answer LLM agents too.

One protocol (``Negotiator.choose``), in order of precedence:

1. must propose (the other proposed, or the turn limit): propose the complement of the claim it
   accepted with its last message; else its own last claim when the other's last message
   accepted it; else the complement of the other's latest claim if acceptable; else its demand;
2. the other's last message accepted its own last claim: propose that claim;
3. its own last message accepted a claim the other never proposed on: propose the complement;
4. the other's last message holds a claim it accepts: answer with a deal;
5. otherwise: a claim of its current demand.

A strategy is ``demand`` (the share it claims now) and ``accepts`` (whether a share offered to it
is good enough); both are pure functions of the view, so a negotiator is deterministic — except
``RandomNegotiator``, which draws from the seeded rng.
"""

from __future__ import annotations

import random
import re
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
    render_share,
    score,
)
from stratagem.pools import Pools
from stratagem.registry import Registry

STRATEGIES: Registry[type[Strategy]] = Registry("dond strategy")
HALF = 5  # half of the pool's value to a seat (10 in all)

_SHARE = r"\(?\s*(\d+)\s*books?\s*,\s*(\d+)\s*hats?\s*,?\s*(?:and\s+)?(\d+)\s*balls?\s*\)?"
_CLAIM = re.compile(
    r"\bI(?:'d|\s+would)?\s+(?:ask\s+for|want|take|get|keep|like|propose\s+to\s+keep)\s*" + _SHARE,
    re.I,
)
_DEAL = re.compile(r"\bdeal\b[:,!.]?\s+you\s+get\s*" + _SHARE, re.I)
_VALUES = re.compile(r"my values: a book is worth (\d+), a hat (\d+),? (?:and )?a ball (\d+)", re.I)


def claim_text(share: Items) -> str:
    """Returns the claim message for ``share``."""
    return f"I ask for {render_share(share)}; you get the rest."


def deal_text(their_share: Items) -> str:
    """Returns the message accepting the other seat's claim ``their_share``."""
    return f"Deal: you get {render_share(their_share)} and I get the rest."


def values_text(values: Items) -> str:
    """Returns the statement of one's own values."""
    return f"My values: a book is worth {values[0]}, a hat {values[1]}, a ball {values[2]}."


def _share(match: re.Match[str] | None) -> Items | None:
    if match is None:
        return None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def claim_in(message: str) -> Items | None:
    """Returns the share a message claims for its writer (the last claim in it), or None."""
    return _share(next(reversed(list(_CLAIM.finditer(message))), None))


def deal_in(message: str) -> Items | None:
    """Returns the share a deal message grants its reader, or None."""
    return _share(_DEAL.search(message))


def values_in(message: str) -> Items | None:
    """Returns the values a message states for its writer, or None."""
    return _share(_VALUES.search(message))


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


class Negotiator(Strategy):
    """The shared protocol (module docstring); subclasses define ``demand`` and ``accepts``."""

    def demand(self, view: DondView) -> Items:
        """Returns the share this negotiator claims now."""
        raise NotImplementedError

    def accepts(self, view: DondView, share: Items) -> bool:
        """Returns whether receiving ``share`` is good enough now."""
        raise NotImplementedError

    def preamble(self, view: DondView) -> str:
        """Returns what a claim message says before the claim (empty by default)."""
        return ""

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
            return Propose(self.demand(view))
        if confirmed is not None:
            return Propose(confirmed)
        if dealt is not None:
            return Propose(complement(counts, dealt))
        if acceptable:
            return Say(deal_text(theirs))  # type: ignore[arg-type]
        return Say(" ".join(x for x in (self.preamble(view), claim_text(self.demand(view))) if x))


def valued(view: DondView) -> Items:
    """Every unit of every item type the seat values (worth 10 to it)."""
    return tuple(n if v > 0 else 0 for n, v in zip(view.counts, view.values, strict=True))  # type: ignore[return-value]


def best_type(view: DondView) -> int:
    """The item type with the highest value per unit (ties: higher total value, then books,
    hats, balls order)."""
    return max(range(3), key=lambda i: (view.values[i], view.values[i] * view.counts[i], -i))


@STRATEGIES
@dataclass(frozen=True)
class ValueGreedy(Negotiator):
    """Claims every unit of every type it values (worth 10 to it) in its first ``k`` messages,
    accepting nothing. From its ``k``-th message on it concedes the rest: it claims only all units
    of its best type (``best_type``) and accepts any offer worth at least that much to it."""

    k: int = 4

    def _conceding(self, view: DondView) -> bool:
        return len(view.my_messages()) >= self.k

    def demand(self, view: DondView) -> Items:
        """Everything it values, or after ``k`` messages all units of its best type."""
        if not self._conceding(view):
            return valued(view)
        best = best_type(view)
        return tuple(n if i == best else 0 for i, n in enumerate(view.counts))  # type: ignore[return-value]

    def accepts(self, view: DondView, share: Items) -> bool:
        """After ``k`` messages: any share worth at least its best type; before: none."""
        if not self._conceding(view):
            return False
        return score(view.values, share) >= score(view.values, self.demand(view))


@STRATEGIES
@dataclass(frozen=True)
class FairSplit(Negotiator):
    """Claims the share whose value to itself is closest to half (5), ties broken by keeping
    fewer items, then by the smallest (books, hats, balls); accepts any share worth at least
    ``5 − slack`` to it."""

    slack: int = 1

    def demand(self, view: DondView) -> Items:
        """The share worth closest to 5 to itself (ties: fewer items, then smallest)."""
        return min(
            divisions(view.counts),
            key=lambda s: (abs(score(view.values, s) - HALF), sum(s), s),
        )

    def accepts(self, view: DondView, share: Items) -> bool:
        """Whether ``share`` is worth at least ``5 − slack`` to it."""
        return score(view.values, share) >= HALF - self.slack

    def preamble(self, view: DondView) -> str:
        """A word on fairness."""
        return "Let us split this fairly."


def inferred_values(view: DondView) -> tuple[float, float, float]:
    """The other seat's values as the cooperative negotiator infers them: the values its latest
    statement gives, else a flat prior (every unit worth 10 / the number of items)."""
    for message in reversed(view.their_messages()):
        stated = values_in(message)
        if stated is not None:
            return (float(stated[0]), float(stated[1]), float(stated[2]))
    flat = 10 / sum(view.counts)
    return (flat, flat, flat)


@STRATEGIES
@dataclass(frozen=True)
class Cooperative(Negotiator):
    """States its values in every claim and claims the welfare-maximising division it can infer:
    the share maximising its own value plus the other's inferred value of the rest
    (``inferred_values``), ties broken by the smallest gap between the two, then by keeping
    fewer items, then by the smallest (books, hats, balls). Accepts exactly the shares whose
    division is welfare-maximising under the same inference."""

    def _welfare(self, view: DondView, share: Items) -> float:
        theirs = inferred_values(view)
        rest = complement(view.counts, share)
        return score(view.values, share) + sum(v * n for v, n in zip(theirs, rest, strict=True))

    def demand(self, view: DondView) -> Items:
        """The welfare-maximising share (ties: smallest gap, fewer items, smallest)."""
        theirs = inferred_values(view)

        def key(s: Items) -> tuple:
            mine = score(view.values, s)
            other = sum(v * n for v, n in zip(theirs, complement(view.counts, s), strict=True))
            return (-round(mine + other, 9), round(abs(mine - other), 9), sum(s), s)

        return min(divisions(view.counts), key=key)

    def accepts(self, view: DondView, share: Items) -> bool:
        """Whether the division giving it ``share`` has the highest inferred welfare."""
        best = self._welfare(view, self.demand(view))
        return self._welfare(view, share) >= best - 1e-9

    def preamble(self, view: DondView) -> str:
        """Its values, stated openly."""
        return values_text(view.values)


@STRATEGIES
@dataclass(frozen=True)
class Stubborn(Negotiator):
    """Claims every unit of every type it values (worth 10 to it), in every message, and never
    accepts a claim; it proposes that claim whenever it proposes."""

    def demand(self, view: DondView) -> Items:
        """Everything it values."""
        return valued(view)

    def accepts(self, view: DondView, share: Items) -> bool:
        """Never."""
        return False

    def preamble(self, view: DondView) -> str:
        """A word of warning."""
        return "I will not move on this."


@STRATEGIES
class RandomNegotiator(Strategy):
    """Plays uniformly random turns, ignoring its values: a random share when a proposal is due;
    otherwise (once a message was sent) a random share with probability 1/4, else a message
    drawn uniformly from a random claim, a random deal and three fixed lines."""

    def choose(self, view: DondView, rng: random.Random) -> Turn:
        """Returns a random valid turn (module docstring)."""
        share: Items = tuple(rng.randint(0, n) for n in view.counts)  # type: ignore[assignment]
        if view.must_propose or (view.discussed and rng.random() < 0.25):
            return Propose(share)
        lines = (
            claim_text(share),
            deal_text(share),
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
