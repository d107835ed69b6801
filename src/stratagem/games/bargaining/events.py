"""Bargaining's event and view types: what the engine records and what a seat is shown.

Kept apart from ``engine`` (which produces them) and ``prompts`` (which renders them), so that
neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stratagem.game import Seat

SELLER, BUYER = 0, 1
ROLE = {SELLER: "seller", BUYER: "buyer"}
PRIVATE_KINDS = frozenset({"search", "fallback"})


@dataclass(frozen=True, slots=True, order=True)
class Event:
    """One processed tool call (or engine note), ordered by (time, seq)."""

    time: float
    seq: int
    kind: str = field(compare=False)  # listing offer respond message search quit wait wait_time
    seat: Seat = field(compare=False)  # fallback (the engine's note that a turn was replaced)
    data: dict[str, Any] = field(compare=False, default_factory=dict)

    @property
    def private(self) -> bool:
        """Whether only the acting seat may see this event."""
        return self.kind in PRIVATE_KINDS

    def to_dict(self) -> dict[str, Any]:
        """Returns the event as the flat dict traces store."""
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
    low: float  # the item's historical price range, shown to both seats
    high: float
    round: int  # 1-based; a round is one turn, the seller's listing is round 1
    max_rounds: int
    listing: bool  # this is the seller's listing turn
    my_offers: tuple[float, ...]
    their_offers: tuple[float, ...]
    their_standing: float | None  # the counterpart's open offer, if any
    my_standing: float | None  # this seat's own open offer, if any
    correction: str | None
