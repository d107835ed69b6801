"""The bilateral-trade engine: a discrete-event simulation inside the episode state (SPEC §8).

Events carry (timestamp, sequence, kind, seat, data) and are processed from a min-heap keyed by
(timestamp, sequence), so timestamps never decrease. Protocol: the seller lists (round 0), the
buyer opens round 1, turns alternate, and the episode ends on an acceptance, a quit or the round
limit. Each turn is at most three tool calls ending in one terminal call; a turn takes one time
unit, ``wait_for_time_period`` skips more (capped). All calls of one turn share a timestamp and are
shown to the counterpart as one observation. Search results and Thought text stay private.

Bad turns (unparseable, or breaking the protocol: answering when there is no offer, listing
without a price) are sent back once as a correction (``max_corrections``); the next bad turn gets
the documented fallback — ``wait_for_response()``, or for the seller's listing a listing at the
catalog high price — and both are recorded.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stratagem.errors import GameError
from stratagem.game import Invalid, Observation, RoundResult, Seat
from stratagem.games.bargaining.catalog import Scenario
from stratagem.games.bargaining.tools import Call, Turn
from stratagem.seeding import derive

SELLER, BUYER = 0, 1
ROLE = {SELLER: "seller", BUYER: "buyer"}
TURN_SECONDS = 1.0


@dataclass(frozen=True, slots=True, order=True)
class Event:
    time: float
    seq: int
    kind: str = field(compare=False)  # listing offer message respond quit wait wait_time search
    seat: Seat = field(compare=False)
    data: dict[str, Any] = field(compare=False, default_factory=dict)

    @property
    def private(self) -> bool:
        return self.kind in ("search", "fallback")

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "seq": self.seq,
            "kind": self.kind,
            "seat": self.seat,
            **self.data,
        }


@dataclass(frozen=True, slots=True)
class BargainingView:
    """What a seat knows, typed, for rule-based bargainers."""

    role: str
    reservation: float
    low: float  # the catalog's historical price range (rule-based bargainers read it directly)
    high: float
    round: int
    max_rounds: int
    listing: bool  # this is the seller's listing turn
    my_offers: tuple[float, ...]
    their_offers: tuple[float, ...]
    their_standing: float | None  # the counterpart's open offer, if any
    correction: str | None


class BargainingState:
    def __init__(self, game: Any, scenario: Scenario, seed: int):
        self.game = game
        self.setup = scenario
        self.seed = seed
        self.max_rounds: int = game.max_rounds
        self.heap: list[Event] = []
        self.log: list[Event] = []
        self.clock = 0.0
        self.seq = 0
        self.turn_seat: Seat = SELLER
        self.round = 0
        self.turns = 0
        self.standing: dict[Seat, float | None] = {SELLER: None, BUYER: None}
        self.offers: dict[Seat, list[float]] = {SELLER: [], BUYER: []}
        self.rejected: dict[Seat, list[float]] = {SELLER: [], BUYER: []}  # opponent offers refused
        self.moves: list[tuple[Seat, str]] = []
        self.corrections = 0
        self.correction: str | None = None
        self.parse_failures = [0, 0]
        self.fallbacks = [0, 0]
        self.done = False
        self.end_reason: str | None = None
        self.price: float | None = None
        self.accepted_by: Seat | None = None

    def value(self, seat: Seat) -> float:
        return self.setup.seller_value if seat == SELLER else self.setup.buyer_value

    def to_act(self) -> tuple[Seat, ...]:
        return () if self.done else (self.turn_seat,)

    def view(self, seat: Seat) -> BargainingView:
        other = 1 - seat
        return BargainingView(
            role=ROLE[seat],
            reservation=self.value(seat),
            low=self.setup.item.low,
            high=self.setup.item.high,
            round=self.round,
            max_rounds=self.max_rounds,
            listing=self.round == 0 and seat == SELLER,
            my_offers=tuple(self.offers[seat]),
            their_offers=tuple(self.offers[other]),
            their_standing=self.standing[other],
            correction=self.correction,
        )

    def observe(self, seat: Seat) -> Observation[BargainingView]:
        if self.to_act() != (seat,):
            raise GameError(f"bargaining: seat {seat} is not to act")
        from stratagem.games.bargaining import prompts

        view = self.view(seat)
        return Observation(
            game=self.game.name,
            seat=seat,
            round=self.round,
            rules=prompts.system_prompt(
                self.setup, seat, self.max_rounds, self.game.strategy_guide
            ),
            prompt=prompts.user_prompt(self.visible(seat), view, seat),
            legal=(),
            view=view,
            seed=derive(self.seed, "act", seat, self.turns, self.corrections),
        )

    def visible(self, seat: Seat) -> list[Event]:
        """Every processed event this seat may see: all public ones and its own private ones."""
        return [e for e in self.log if not e.private or e.seat == seat]

    def apply(self, actions: Mapping[Seat, Turn | Invalid]) -> RoundResult | None:
        seat = self.turn_seat
        if self.done or set(actions) != {seat}:
            raise GameError(f"bargaining: seat {seat} is to act, got {sorted(actions)}")
        turn = actions[seat]
        problem = turn.reason if isinstance(turn, Invalid) else self._protocol_error(seat, turn)
        if problem is not None:
            self.parse_failures[seat] += 1
            self.moves.append((seat, f"invalid: {problem}"))
            if self.corrections < self.game.max_corrections:
                self.corrections += 1
                self.correction = problem
                return None  # the same seat answers again, shown the reason
            turn = self._fallback(seat)
            self.fallbacks[seat] += 1
            self._push("fallback", seat, {"reason": problem})
        else:
            self.moves.append((seat, render_turn(turn)))
        self.corrections, self.correction = 0, None
        self._run_turn(seat, turn)
        return self._result() if self.done else None

    def _protocol_error(self, seat: Seat, turn: Turn) -> str | None:
        names = [c.name for c in turn.calls]
        if self.round == 0 and seat == SELLER:
            if "make_offer" not in names:
                return "list the item first: make_offer(price=...) then wait_for_response()"
            if "respond_to_offer" in names:
                return "there is no offer to respond to yet"
        if "respond_to_offer" in names and self.standing[1 - seat] is None:
            return "there is no open offer from the other side to respond to"
        if names.count("make_offer") > 1:
            return "make at most one offer per turn"
        return None

    def _fallback(self, seat: Seat) -> Turn:
        if self.round == 0 and seat == SELLER:
            price = self.setup.item.high
            return Turn((Call("make_offer", (("price", price),)), Call("wait_for_response")))
        return Turn((Call("wait_for_response"),))

    def _push(
        self, kind: str, seat: Seat, data: dict[str, Any] | None = None, at: float | None = None
    ) -> None:
        heapq.heappush(
            self.heap, Event(self.clock if at is None else at, self.seq, kind, seat, data or {})
        )
        self.seq += 1

    def _run_turn(self, seat: Seat, turn: Turn) -> None:
        resume = self.clock + TURN_SECONDS
        for call in turn.calls:
            if call.name == "make_offer":
                kind = "listing" if self.round == 0 and seat == SELLER else "offer"
                self._push(
                    kind, seat, {"price": call.arg("price"), "side_offer": call.arg("side_offer")}
                )
            elif call.name == "respond_to_offer":
                self._push(
                    "respond",
                    seat,
                    {"accept": call.arg("response"), "price": self.standing[1 - seat]},
                )
            elif call.name == "send_message":
                self._push("message", seat, {"content": call.arg("content")})
            elif call.name == "search_price":
                item = self.setup.item
                self._push("search", seat, {"low": item.low, "high": item.high})
            elif call.name == "quit_negotiation":
                self._push("quit", seat)
            elif call.name == "wait_for_response":
                self._push("wait", seat)
            elif call.name == "wait_for_time_period":
                duration = call.arg("duration")
                self._push("wait_time", seat, {"duration": duration})
                resume = self.clock + duration
        self._drain()
        self.turns += 1
        self.clock = resume
        if self.done:
            return
        self.turn_seat = 1 - seat
        if self.turn_seat == BUYER:
            self.round += 1
            if self.round > self.max_rounds:
                self._end("round_limit")

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
            if self.standing[other] is not None:  # a counter-offer refuses the open offer
                self.rejected[e.seat].append(self.standing[other])
                self.standing[other] = None
            self.standing[e.seat] = e.data["price"]
            self.offers[e.seat].append(e.data["price"])
        elif e.kind == "respond":
            price = self.standing[other]
            if e.data["accept"]:
                self.price, self.accepted_by = price, e.seat
                self._end("deal")
            else:
                self.rejected[e.seat].append(price)
                self.standing[other] = None
        elif e.kind == "quit":
            self._end("quit")

    def _end(self, reason: str) -> None:
        self.done, self.end_reason = True, reason

    def utilities(self) -> tuple[float, float]:
        if self.price is None:
            return 0.0, 0.0
        return (
            round(self.price - self.setup.seller_value, 6),
            round(self.setup.buyer_value - self.price, 6),
        )

    def _result(self) -> RoundResult:
        return RoundResult(
            round=0,
            moves=tuple(self.moves),
            payoffs=self.utilities(),
            info={
                "deal": self.price is not None,
                "price": self.price,
                "accepted_by": self.accepted_by,
                "end_reason": self.end_reason,
                "rounds": min(self.round, self.max_rounds),
                "offers": [self.offers[SELLER], self.offers[BUYER]],
                "rejected": [self.rejected[SELLER], self.rejected[BUYER]],
                "parse_failures": self.parse_failures,
                "fallbacks": self.fallbacks,
                "events": [e.to_dict() for e in self.log],
            },
        )

    def private(self, seat: Seat) -> Any:
        return (self.setup.item.title, self.value(seat))

    def scenario(self) -> dict[str, Any]:
        return self.setup.to_dict()


def render_turn(turn: Turn) -> str:
    return "; ".join(c.render() for c in turn.calls)
