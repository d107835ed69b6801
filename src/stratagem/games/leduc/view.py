"""What a Leduc seat sees: its finished hands and the decision in front of it."""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.games.leduc.rules import RAISE_SIZE, Act, contributions


@dataclass(frozen=True, slots=True)
class PastHand:
    """A finished hand as one seat remembers it: its card, the public card when the second round
    was reached, the opponent's card when a showdown showed it, its position, the betting of each
    round and its payoff."""

    my_card: str
    public: str | None  # dealt only when the first round closed without a fold
    their_card: str | None  # shown only at a showdown
    first: bool  # whether this seat acted first
    betting: tuple[str, ...]  # per round, letters F C R in the order played
    my_payoff: float

    @property
    def folded(self) -> bool | None:
        """True when this seat folded, False when the opponent did, None at a showdown."""
        last = self.betting[-1]
        if not last.endswith("F"):
            return None
        return ((len(last) - 1) % 2 == 0) == self.first


@dataclass(frozen=True, slots=True)
class LeducView:
    """What the seat to act sees: the hand, its card, the public card (round 2), the betting of
    each round so far, its position, its earlier hands and the legal actions.

    ``betting`` holds one letter string per round begun (``("CR",)`` in round 1,
    ``("RC", "")`` at the start of round 2); letter ``i`` of a round was played by the first to
    act when ``i`` is even.
    """

    hand: int
    hands: int
    card: str
    public: str | None
    betting: tuple[str, ...]
    first: bool  # whether this seat acts first in this hand (in both rounds)
    past: tuple[PastHand, ...]
    legal: tuple[Act, ...]

    @property
    def round(self) -> int:
        """The 1-based betting round."""
        return len(self.betting)

    @property
    def facing_raise(self) -> bool:
        """Whether the opponent's last action was a raise this seat must answer."""
        return self.betting[-1].endswith("R")

    @property
    def put_in(self) -> tuple[int, int]:
        """Chips in the pot from this seat and from the opponent (antes included)."""
        first, second = contributions(self.betting)
        return (first, second) if self.first else (second, first)

    @property
    def raise_size(self) -> int:
        """The fixed raise of this round: 2 in the first, 4 in the second."""
        return RAISE_SIZE[self.round - 1]
