"""The bilateral-trade engine: a discrete-event simulation inside the episode state (SPEC §8).

Events carry (timestamp, sequence, kind, seat, data) and are processed from a min-heap keyed by
(timestamp, sequence), so timestamps never decrease. Protocol (seed 004 §3.3.2, App. A.4): the
seller lists in round 1, the buyer opens in round 2, the parties alternate, and the episode ends
on an acceptance, a quit or after the last round. A **round is one turn** of one party, as in the
paper's transcripts (the listing is round 1), so ``max_rounds`` (default 10) counts turns.

A turn is one to three tool calls. ``quit_negotiation`` and ``wait_for_response`` end a turn; a
turn without either ends with an implicit ``wait_for_response()`` (recorded in the event as
``implicit``), so ``respond_to_offer(False)`` then ``make_offer(p)`` is one turn: reject and
counter. An acceptance closes the deal at the accepted offer's price; a turn may not both accept
and make an offer. A counter-offer refuses the open offer it replaces. A turn takes one time unit;
``wait_for_time_period`` pushes the turn's later calls (and the next turn) further in time, up to a
cap. All calls of one turn at one timestamp are shown to the counterpart as one line. Search
results, fallbacks and Thought text stay private.

Bad turns (unparseable, or breaking the protocol: answering when there is no offer, listing
without a price, accepting and offering at once) are sent back as a correction up to
``max_corrections`` times per turn (the shared policy of ``games.corrections``); the next bad turn
gets the documented fallback — an implicit
``wait_for_response()``, or for the seller's listing a listing at the catalog high price (flagged,
so metrics can leave it out) — and both are recorded.

Departure from the paper: the engine batches a turn's events by timestamp and seat exactly as the
paper's EventManager does, but the counterpart's message text is shown as a quoted, escaped
string (RELIABILITY G5), never as raw lines.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stratagem.errors import GameError
from stratagem.game import Invalid, Observation, RoundResult, Seat
from stratagem.games.bargaining import prompts
from stratagem.games.bargaining.catalog import Scenario
from stratagem.games.bargaining.events import BUYER, ROLE, SELLER, BargainingView, Event
from stratagem.games.bargaining.tools import MAX_PRICE, Call, ParseError, Turn, validate_call
from stratagem.games.corrections import Corrections, Verdict
from stratagem.seeding import derive

TURN_SECONDS = 1.0
END_REASONS = ("deal", "quit", "round_limit")


@dataclass(frozen=True, slots=True)
class Settings:
    """The game parameters an episode needs (``Bargaining.params`` minus the catalog)."""

    max_rounds: int = 10
    max_corrections: int = 1
    strategy_guide: bool = True
    prompt_style: str = "chat"


class BargainingState:
    """One negotiation in progress: the event heap, the log, open offers and the turn order."""

    def __init__(self, scenario: Scenario, seed: int, settings: Settings | None = None):
        """Starts a negotiation of ``scenario``; the seller is to list in round 1."""
        settings = settings or Settings()
        self.setup = scenario
        self.seed = seed
        self.settings = settings
        self.max_rounds = settings.max_rounds
        self.heap: list[Event] = []
        self.log: list[Event] = []
        self.clock = 0.0
        self.seq = 0
        self.turn_seat: Seat = SELLER
        self.round = 1
        self.turns = 0
        self.standing: dict[Seat, float | None] = {SELLER: None, BUYER: None}
        self.offers: dict[Seat, list[float]] = {SELLER: [], BUYER: []}
        self.rejected: dict[Seat, list[float]] = {SELLER: [], BUYER: []}  # opponent offers refused
        self.shown = [0, 0]  # per seat: the log index up to which it has been shown events
        self.moves: list[tuple[Seat, str]] = []
        self.policy = Corrections(retries=settings.max_corrections)
        self.correction: str | None = None  # the reason the seat to act must answer again
        self.parse_failures = [0, 0]
        self.fallbacks = [0, 0]
        self.done = False
        self.end_reason: str | None = None
        self.price: float | None = None
        self.accepted_by: Seat | None = None
        self._rules: list[str | None] = [None, None]

    def value(self, seat: Seat) -> float:
        """Returns ``seat``'s reservation value."""
        return self.setup.seller_value if seat == SELLER else self.setup.buyer_value

    def to_act(self) -> tuple[Seat, ...]:
        """Returns ``(seat,)`` for the seat whose turn it is, ``()`` once the negotiation ended."""
        return () if self.done else (self.turn_seat,)

    def view(self, seat: Seat) -> BargainingView:
        """Returns what ``seat`` knows now, typed."""
        other = 1 - seat
        return BargainingView(
            role=ROLE[seat],
            reservation=self.value(seat),
            low=self.setup.item.low,
            high=self.setup.item.high,
            round=self.round,
            max_rounds=self.max_rounds,
            listing=self.listing_turn(seat),
            my_offers=tuple(self.offers[seat]),
            their_offers=tuple(self.offers[other]),
            their_standing=self.standing[other],
            my_standing=self.standing[seat],
            correction=self.correction,
        )

    def listing_turn(self, seat: Seat) -> bool:
        """Whether ``seat`` is the seller about to post the listing (round 1)."""
        return seat == SELLER and self.round == 1 and not self.offers[SELLER]

    def observe(self, seat: Seat) -> Observation[BargainingView]:
        """Returns ``seat``'s observation: the fixed rules, and a prompt with what is new since
        it last acted (``chat``), the whole story (``single``), or the correction to answer."""
        if self.to_act() != (seat,):
            raise GameError(f"bargaining: seat {seat} is not to act")
        view = self.view(seat)
        rules = self._rules[seat]
        if rules is None:
            rules = self._rules[seat] = prompts.system_prompt(
                self.setup, seat, self.max_rounds, self.settings.strategy_guide
            )
        if self.settings.prompt_style == "single":
            prompt = prompts.full_prompt(self.visible(seat), view, seat, self.policy.attempt)
        elif self.correction is not None:
            prompt = prompts.correction_prompt(self.correction, self.policy.attempt)
        else:
            prompt = prompts.new_prompt(self.new_events(seat), view, seat)
        return Observation(
            game="bargaining",
            seat=seat,
            round=self.round,
            rules=rules,
            prompt=prompt,
            legal=(),
            view=view,
            seed=derive(self.seed, "act", seat, self.turns, self.policy.attempt),
            attempt=self.policy.attempt,
        )

    def visible(self, seat: Seat) -> list[Event]:
        """Returns every processed event ``seat`` may see: all public ones, its own private
        ones."""
        return [e for e in self.log if not e.private or e.seat == seat]

    def new_events(self, seat: Seat) -> list[Event]:
        """Returns what ``seat`` learns since it last acted: the counterpart's public events and
        its own private ones (search results, a fallback); its own moves it already knows."""
        return [e for e in self.log[self.shown[seat] :] if (e.seat == seat) == e.private]

    def apply(self, actions: Mapping[Seat, Turn | Invalid]) -> RoundResult | None:
        """Plays the turn of the seat to act; returns the result when the negotiation ends.

        A refused turn (``Invalid`` or against the protocol) returns None with the same seat to
        act and a correction to answer, or, once corrections are used up, plays the fallback.
        """
        seat = self.turn_seat
        if self.done or set(actions) != {seat}:
            raise GameError(f"bargaining: seat {seat} is to act, got {sorted(actions)}")
        turn = actions[seat]
        if isinstance(turn, Invalid):
            problem: str | None = turn.reason
        else:
            problem = _bad_value(turn) or self.protocol_error(seat, turn)
        fallback: str | None = None
        if problem is not None:
            self.parse_failures[seat] += 1
            self.moves.append((seat, f"invalid: {problem}"))
            if self.policy.refuse(seat) is Verdict.RETRY:
                self.correction = problem
                return None  # the same seat answers again, shown the reason
            turn, fallback = self._fallback(seat), problem  # no abort: the policy has no limit
            self.fallbacks[seat] += 1
        else:
            assert isinstance(turn, Turn)
            self.moves.append((seat, render_turn(turn)))
            self.policy.accept(seat)
        self.correction = None
        self.shown[seat] = len(self.log)  # the seat has now seen everything logged so far
        self._run_turn(seat, turn, fallback)
        return self._result() if self.done else None

    def protocol_error(self, seat: Seat, turn: Turn) -> str | None:
        """Returns why ``turn`` breaks the protocol now, or None when it may be played."""
        names = [c.name for c in turn.calls]
        other = ROLE[1 - seat]
        if self.listing_turn(seat):
            if "make_offer" not in names:
                return "list the item first: make_offer(price=...)"
            if "respond_to_offer" in names:
                return "there is no offer to respond to yet"
        if names.count("make_offer") > 1:
            return "make at most one offer per turn"
        if names.count("respond_to_offer") > 1:
            return "respond to the open offer at most once per turn"
        if "respond_to_offer" not in names:
            return None
        if self.standing[1 - seat] is None:
            return f"there is no open offer from the {other} to respond to"
        return _response_error(turn, names, other)

    def _fallback(self, seat: Seat) -> Turn:
        if self.listing_turn(seat):
            price = self.setup.item.high
            return Turn((Call("make_offer", (("price", price),)), Call("wait_for_response")))
        return Turn((Call("wait_for_response"),))

    def _push(self, kind: str, seat: Seat, data: dict[str, Any], at: float) -> None:
        heapq.heappush(self.heap, Event(at, self.seq, kind, seat, data))
        self.seq += 1

    def _run_turn(self, seat: Seat, turn: Turn, fallback: str | None) -> None:
        at = self.clock
        listing = self.listing_turn(seat)
        if fallback is not None:
            self._push("fallback", seat, {"reason": fallback, "listing": listing}, at)
        for call in turn.calls:
            kind, data = self._event_of(call, seat, listing)
            if kind == "listing" and fallback is not None:
                data["fallback"] = True  # the engine's price, not the agent's: not an anchor
            self._push(kind, seat, data, at)
            if kind == "wait_time":
                at += data["duration"]  # the turn's later calls and the next turn come later
        if not turn.ends_itself:
            self._push("wait", seat, {"implicit": True}, at)
        self._drain()
        self.turns += 1
        self.clock = at + TURN_SECONDS
        if self.done:
            return
        if self.round >= self.max_rounds:
            self._end("round_limit")
            return
        self.round += 1
        self.turn_seat = 1 - seat

    def _event_of(self, call: Call, seat: Seat, listing: bool) -> tuple[str, dict[str, Any]]:
        """Returns the (kind, data) of the event a call makes, before it is processed."""
        if call.name == "make_offer":
            data = {"price": call.arg("price"), "side_offer": call.arg("side_offer")}
            return ("listing" if listing else "offer"), data
        if call.name == "respond_to_offer":
            return "respond", {"accept": call.arg("response"), "price": self.standing[1 - seat]}
        if call.name == "send_message":
            return "message", {"content": call.arg("content")}
        if call.name == "search_price":
            return "search", {"low": self.setup.item.low, "high": self.setup.item.high}
        if call.name == "quit_negotiation":
            return "quit", {}
        if call.name == "wait_for_response":
            return "wait", {}
        return "wait_time", {"duration": call.arg("duration")}

    def _drain(self) -> None:
        while self.heap and not self.done:
            event = heapq.heappop(self.heap)
            if self.log and (event.time, event.seq) < (self.log[-1].time, self.log[-1].seq):
                raise GameError("bargaining: an event went back in time")
            self.log.append(event)
            self._effect(event)
        self.heap.clear()  # nothing happens after a terminal event

    def _effect(self, e: Event) -> None:
        other = 1 - e.seat
        if e.kind in ("listing", "offer"):
            open_offer = self.standing[other]
            if open_offer is not None:  # a counter-offer refuses the open offer
                self.rejected[e.seat].append(open_offer)
                self.standing[other] = None
            self.standing[e.seat] = e.data["price"]
            self.offers[e.seat].append(e.data["price"])
        elif e.kind == "respond":
            if e.data["price"] != self.standing[other]:
                raise GameError("bargaining: a response to an offer that is no longer open")
            if e.data["accept"]:
                self.price, self.accepted_by = e.data["price"], e.seat
                self._end("deal")
            else:
                self.rejected[e.seat].append(e.data["price"])
                self.standing[other] = None
        elif e.kind == "quit":
            self._end("quit")

    def _end(self, reason: str) -> None:
        self.done, self.end_reason = True, reason

    def utilities(self) -> tuple[float, float]:
        """Returns (seller, buyer) utilities: ``p − v_s`` and ``v_b − p`` on a deal, else 0."""
        if self.price is None:
            return 0.0, 0.0
        return (
            round(self.price - self.setup.seller_value, 6),
            round(self.setup.buyer_value - self.price, 6),
        )

    def _result(self) -> RoundResult:
        payoffs = self.utilities()
        if not all(-MAX_PRICE <= u <= MAX_PRICE for u in payoffs):  # NaN fails too
            raise GameError(
                f"bargaining: scenario {self.setup.index} ended with utilities {payoffs} outside "
                f"the payoff bounds ±{MAX_PRICE:g}"
            )
        return RoundResult(
            round=0,
            moves=tuple(self.moves),
            payoffs=payoffs,
            info={
                "deal": self.price is not None,
                "price": self.price,
                "accepted_by": self.accepted_by,
                "end_reason": self.end_reason,
                "rounds": self.round,
                "max_rounds": self.max_rounds,
                "offers": [self.offers[SELLER], self.offers[BUYER]],
                "rejected": [self.rejected[SELLER], self.rejected[BUYER]],
                "parse_failures": self.parse_failures,
                "fallbacks": self.fallbacks,
                "events": [e.to_dict() for e in self.log],
            },
        )

    def private(self, seat: Seat) -> Any:
        """Returns what ``seat`` alone knows of the deal: the item and its reservation value."""
        return (self.setup.item.title, self.value(seat))

    def scenario(self) -> dict[str, Any]:
        """Returns the scenario (item and both reservation values) for the trace."""
        return self.setup.to_dict()


def _bad_value(turn: Turn) -> str | None:
    """Returns why a call's argument is unusable: agents that build turns in code skip the
    parser, so the engine checks the price cap (and every other argument) itself."""
    for call in turn.calls:
        try:
            validate_call(call.name, dict(call.args))
        except ParseError as exc:
            return str(exc)
    return None


def _response_error(turn: Turn, names: list[str], other: str) -> str | None:
    """Returns why the one ``respond_to_offer`` of ``turn`` (its call ``names``) is out of
    place among its calls, or None; ``other`` names the role whose open offer it answers."""
    at = names.index("respond_to_offer")
    if turn.calls[at].arg("response"):
        if "make_offer" in names:
            return (
                "accept or make an offer, not both: accepting closes the deal at the "
                f"{other}'s price"
            )
        if any(name != "wait_for_response" for name in names[at + 1 :]):
            return "accepting closes the deal: respond_to_offer(response=True) comes last"
    elif "make_offer" in names[:at]:
        return "reject the open offer before you counter: respond_to_offer first"
    return None


def render_turn(turn: Turn) -> str:
    """Returns the calls of ``turn`` on one line, ``; ``-separated (what traces store)."""
    return "; ".join(c.render() for c in turn.calls)
