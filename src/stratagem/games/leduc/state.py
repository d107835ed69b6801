"""A Leduc episode in progress: several hands, seats alternating who acts first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stratagem.errors import GameError
from stratagem.game import Observation, RoundResult, Seat
from stratagem.games.leduc.prompts import HANDS, render, render_new, rules_text
from stratagem.games.leduc.rules import CLOSED, LEGAL, ROUNDS, Act, payoffs
from stratagem.games.leduc.view import LeducView, PastHand
from stratagem.seeding import derive

NAME = "leduc"
Deal = tuple[str, str, str]  # seat 0's card, seat 1's card, the public card


def first_seat(hand: int) -> Seat:
    """The seat that acts first (position 0) in 0-based ``hand``: seat 0 on odd-numbered hands
    (1, 3, ...), seat 1 on even-numbered ones."""
    return hand % 2


class LeducState:
    """Hands of Leduc poker in progress; a round of the episode is a hand.

    ``betting`` holds the current hand's rounds as letter strings (``("RC", "C")``), exactly as
    the tree's information-set keys spell them.
    """

    __slots__ = ("seed", "deals", "hand", "betting", "past", "chat", "hands")

    def __init__(self, seed: int, deals: tuple[Deal, ...], chat: bool = True):
        self.seed = seed
        self.deals = deals
        self.hands = len(deals)
        self.chat = chat  # prompts hold only what is new since the seat last acted
        self.hand = 0
        self.betting: tuple[str, ...] = ("",)
        self.past: list[RoundResult] = []

    def _seat_to_act(self) -> Seat:
        return (first_seat(self.hand) + len(self.betting[-1])) % 2

    def to_act(self) -> tuple[Seat, ...]:
        """Returns the one seat to act, or () when the episode is over."""
        return () if self.hand >= self.hands else (self._seat_to_act(),)

    def view(self, seat: Seat) -> LeducView:
        """Returns what ``seat`` sees now (its card, the public card once round 2 began)."""
        deal = self.deals[self.hand]
        return LeducView(
            hand=self.hand,
            hands=self.hands,
            card=deal[seat],
            public=deal[2] if len(self.betting) == ROUNDS else None,
            betting=self.betting,
            first=first_seat(self.hand) == seat,
            past=tuple(past_hand(r, seat) for r in self.past),
            legal=LEGAL[self.betting[-1]],
        )

    def observe(self, seat: Seat) -> Observation[LeducView]:
        """Returns what ``seat`` sees at its turn; raises ``GameError`` if it is not to act."""
        if self.to_act() != (seat,):
            raise GameError(f"leduc: seat {seat} is not to act")
        view = self.view(seat)
        moves = sum(len(s) for s in self.betting)
        return Observation(
            game=NAME,
            seat=seat,
            round=self.hand,
            rules=rules_text(self.hands),
            prompt=render_new(view) if self.chat else render(view),
            legal=tuple(a.value for a in view.legal),
            view=view,
            seed=derive(self.seed, "act", seat, self.hand, moves),
        )

    def apply(self, actions: Mapping[Seat, Any]) -> RoundResult | None:
        """Applies the action of the seat to act; returns the hand when it ends, else None.
        Raises ``GameError`` unless ``actions`` is one legal action of the seat to act."""
        if self.hand >= self.hands:
            raise GameError("leduc: the episode is over")
        seat = self._seat_to_act()
        if set(actions) != {seat}:
            raise GameError(f"leduc: seat {seat} is to act, got actions for {sorted(actions)}")
        try:
            action = Act(actions[seat])
        except ValueError:
            raise GameError(f"leduc: {actions[seat]!r} is not a Leduc action") from None
        sequence = self.betting[-1]
        if action not in LEGAL[sequence]:
            raise GameError(f"leduc: {action} is not legal after {'/'.join(self.betting)!r}")
        sequence += action.value[0]
        self.betting = (*self.betting[:-1], sequence)
        if sequence in CLOSED and len(self.betting) < ROUNDS:
            self.betting = (*self.betting, "")  # the public card is turned
            return None
        if not (sequence.endswith("F") or sequence in CLOSED):
            return None
        return self._end_hand()

    def _end_hand(self) -> RoundResult:
        first = first_seat(self.hand)
        deal = self.deals[self.hand]
        cards = (deal[first], deal[1 - first])  # by position
        public = deal[2] if len(self.betting) == ROUNDS else None
        won = payoffs(cards, public, self.betting)
        by_seat = (won[0], won[1]) if first == 0 else (won[1], won[0])
        moves = tuple(
            ((first + i) % 2, {"F": "FOLD", "C": "CALL", "R": "RAISE"}[letter])
            for sequence in self.betting
            for i, letter in enumerate(sequence)
        )
        result = RoundResult(
            round=self.hand,
            moves=moves,
            payoffs=(float(by_seat[0]), float(by_seat[1])),
            info={
                "cards": [deal[0], deal[1]],
                "public": public,
                "first": first,
                "betting": list(self.betting),
                "showdown": not self.betting[-1].endswith("F"),
            },
        )
        self.past.append(result)
        self.hand += 1
        self.betting = ("",)
        return result

    def private(self, seat: Seat) -> Any:
        """Returns the seat's card in the current hand (None once the episode is over)."""
        return self.deals[self.hand][seat] if self.hand < self.hands else None

    def scenario(self) -> dict[str, Any]:
        """Returns every hand's deal: seat 0's card, seat 1's card, the public card."""
        return {"deals": [list(d) for d in self.deals]}


def past_hand(result: RoundResult, seat: Seat) -> PastHand:
    """Returns the finished hand ``result`` as ``seat`` remembers it."""
    info = result.info
    return PastHand(
        my_card=info["cards"][seat],
        public=info["public"],
        their_card=info["cards"][1 - seat] if info["showdown"] else None,
        first=info["first"] == seat,
        betting=tuple(info["betting"]),
        my_payoff=result.payoffs[seat],
    )


__all__ = ["HANDS", "NAME", "Deal", "LeducState", "first_seat", "past_hand"]
