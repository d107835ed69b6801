"""What a Deal or No Deal seat sees: its lines of the dialogue and its typed view.

Proposals are private, as in seed 002: the other seat learns *that* a proposal was submitted,
never its counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.games.dond.contexts import Items
from stratagem.games.dond.turns import Kind


@dataclass(frozen=True, slots=True)
class Line:
    """One accepted turn as a seat sees it: the other's proposal shows no counts."""

    mine: bool
    kind: Kind
    text: str  # the message; a proposal's ``(x books, ...)`` when it is the seat's own, else ""


@dataclass(frozen=True, slots=True)
class DondView:
    """What the seat to act knows, typed, for rule-based strategies."""

    counts: Items
    values: Items  # its own values only
    lam: float
    turn: int  # accepted turns so far (0 on the first turn of the episode)
    max_turns: int
    first: bool  # whether this seat spoke first
    dialogue: tuple[Line, ...]
    correction: str | None = None  # why the last answer was refused, when answering again
    attempt: int = 0

    @property
    def other_proposed(self) -> bool:
        """Whether the other seat has submitted its proposal."""
        return any(not line.mine and line.kind is Kind.PROPOSE for line in self.dialogue)

    @property
    def discussed(self) -> bool:
        """Whether any message has been sent (a proposal needs one first)."""
        return any(line.kind is Kind.MESSAGE for line in self.dialogue)

    @property
    def must_propose(self) -> bool:
        """Whether only a proposal is accepted now (the other proposed, or the turn limit)."""
        return self.other_proposed or self.turn >= self.max_turns

    @property
    def new(self) -> tuple[Line, ...]:
        """The other seat's turns since this seat last spoke."""
        last = max((i for i, line in enumerate(self.dialogue) if line.mine), default=-1)
        return self.dialogue[last + 1 :]

    def their_messages(self) -> list[str]:
        """The other seat's messages, oldest first."""
        return [x.text for x in self.dialogue if not x.mine and x.kind is Kind.MESSAGE]

    def my_messages(self) -> list[str]:
        """This seat's own messages, oldest first."""
        return [x.text for x in self.dialogue if x.mine and x.kind is Kind.MESSAGE]
