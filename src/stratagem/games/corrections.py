"""The shared correction policy of free-form games (bargaining; Deal or No Deal).

When a game refuses an answer (``Invalid(reason)``) it shows the reason to the same seat, which
answers again (the observation's ``attempt`` counts the tries). How many times, and what happens
when the seat keeps failing, is this policy — the rules live in the game, not in the agent:

- ``retries`` corrections are sent back per turn; the next failure gets the game's documented
  ``fallback`` move (bargaining: one retry, then ``wait_for_response()``);
- ``abort_after`` consecutive failures of one seat, across turns, end the episode (Deal or No
  Deal: five, scoring 0 for both; seed 002 §3).

Either limit may be None (no limit). The policy only counts; the game decides what a fallback or
an abort means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from stratagem.game import Seat


class Verdict(StrEnum):
    """What the game does with a refused answer."""

    RETRY = "retry"  # send the correction back; the same seat answers again
    FALLBACK = "fallback"  # play the game's fallback move for the seat
    ABORT = "abort"  # end the episode


@dataclass
class Corrections:
    """Counts refused answers per seat and turn, and says what happens next."""

    retries: int | None = 1
    abort_after: int | None = None
    attempt: int = 0  # corrections sent in the current turn
    consecutive: list[int] = field(default_factory=lambda: [0, 0])  # failures in a row, by seat
    total: list[int] = field(default_factory=lambda: [0, 0])  # every refused answer, by seat

    def refuse(self, seat: Seat) -> Verdict:
        """Record a refused answer of ``seat``; returns what the game must do next."""
        self.consecutive[seat] += 1
        self.total[seat] += 1
        if self.abort_after is not None and self.consecutive[seat] >= self.abort_after:
            return Verdict.ABORT
        if self.retries is None or self.attempt < self.retries:
            self.attempt += 1
            return Verdict.RETRY
        self.attempt = 0
        return Verdict.FALLBACK

    def accept(self, seat: Seat) -> None:
        """Record an accepted answer of ``seat``: its turn is over and its failure run ends."""
        self.consecutive[seat] = 0
        self.attempt = 0


def correction_text(reason: str, attempt: int) -> str:
    """Returns the user turn that sends a refused answer back, stating why (attempt ≥ 1)."""
    return (
        f"Your last answer was not accepted: {reason}. "
        f"Please answer again (correction {attempt}), following the answer format."
    )
