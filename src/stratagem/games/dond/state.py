"""One Deal or No Deal dialogue in progress: whose turn it is, which answers are refused and
why, and the round a finished dialogue pays.

Refused answers are corrected through the shared policy (``games.corrections``): no limit per
turn, and five consecutive refused answers of one seat abort the episode with 0 for both (seed
002 App. A).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stratagem.errors import GameError
from stratagem.game import Invalid, Observation, RoundResult, Seat
from stratagem.games.corrections import Corrections, Verdict, correction_text
from stratagem.games.dond.contexts import (
    Context,
    Items,
    agreed,
    item_scores,
    objective_scores,
    pool_text,
)
from stratagem.games.dond.prompts import full_prompt, new_prompt, system_prompt
from stratagem.games.dond.turns import (
    DEFAULT_MAX_TURNS,
    MAX_FAULTS,
    REASONS,
    Fault,
    Kind,
    Propose,
    Say,
    Turn,
    fault_of,
    render_share,
    token_of,
)
from stratagem.games.dond.view import DondView, Line
from stratagem.seeding import derive

NAME = "dond"  # the game's registry name, as observations carry it


@dataclass(frozen=True, slots=True)
class Settings:
    """The game parameters an episode needs."""

    lam: float = 0.0
    max_turns: int = DEFAULT_MAX_TURNS
    prompt_style: str = "chat"


class DondState:
    """One Deal or No Deal dialogue in progress (one round)."""

    def __init__(self, context: Context, seed: int, settings: Settings | None = None):
        """Starts a dialogue on ``context``; the first speaker is drawn from ``seed``."""
        self.context = context
        self.seed = seed
        self.settings = settings or Settings()
        self.first: Seat = random.Random(derive(seed, "first")).randrange(2)
        self.turn_seat: Seat = self.first
        self.lines: list[tuple[Seat, Turn]] = []  # accepted turns, in order
        self.proposals: list[Items | None] = [None, None]
        self.policy = Corrections(retries=None, abort_after=MAX_FAULTS)
        self.correction: str | None = None
        self.corrections: list[dict[str, Any]] = []
        self.aborted_by: Seat | None = None
        self.done = False
        self._rules: list[str | None] = [None, None]

    @property
    def turn(self) -> int:
        """Accepted turns so far."""
        return len(self.lines)

    def to_act(self) -> tuple[Seat, ...]:
        """Returns ``(seat,)`` for the seat whose turn it is, ``()`` once the dialogue ended."""
        return () if self.done else (self.turn_seat,)

    def view(self, seat: Seat) -> DondView:
        """Returns what ``seat`` knows now, typed."""
        dialogue = tuple(_line(s == seat, turn) for s, turn in self.lines)
        return DondView(
            counts=self.context.counts,
            values=self.context.values[seat],
            lam=self.settings.lam,
            turn=self.turn,
            max_turns=self.settings.max_turns,
            first=self.first == seat,
            dialogue=dialogue,
            correction=self.correction if seat == self.turn_seat else None,
            attempt=self.policy.attempt if seat == self.turn_seat else 0,
        )

    def observe(self, seat: Seat) -> Observation[DondView]:
        """Returns ``seat``'s observation: its rules (own values only) and what is new since it
        last spoke, the whole dialogue (``single``), or the correction to answer."""
        if self.to_act() != (seat,):
            raise GameError(f"dond: seat {seat} is not to act")
        view = self.view(seat)
        rules = self._rules[seat]
        if rules is None:
            rules = self._rules[seat] = system_prompt(view)
        if self.settings.prompt_style == "single":
            prompt = full_prompt(view)
        elif self.correction is not None:
            prompt = correction_text(self.correction, self.policy.attempt)
        else:
            prompt = new_prompt(view)
        return Observation(
            game=NAME,
            seat=seat,
            round=0,
            rules=rules,
            prompt=prompt,
            legal=(),
            view=view,
            seed=derive(self.seed, "act", seat, self.turn, self.policy.attempt),
            attempt=self.policy.attempt,
        )

    def apply(self, actions: Mapping[Seat, Turn | Invalid]) -> RoundResult | None:
        """Plays the turn of the seat to act; returns the round once both proposed or the
        episode aborted, else None (the next turn, or the same seat answering a correction).

        Raises:
            GameError: the episode is over, or ``actions`` is not one answer of the seat to act.
        """
        seat = self.turn_seat
        if self.done or set(actions) != {seat}:
            raise GameError(f"dond: seat {seat} is to act, got answers of seats {sorted(actions)}")
        turn = actions[seat]
        fault, reason = self.fault(seat, turn)
        if fault is not None:
            self.corrections.append(
                {
                    "seat": seat,
                    "turn": self.turn,
                    "attempt": self.policy.attempt,
                    "fault": str(fault),
                    "reason": reason,
                    "answer": token_of(turn),
                }
            )
            verdict = self.policy.refuse(seat)
            if verdict is Verdict.ABORT:
                self.aborted_by, self.done = seat, True
                return self._result()
            assert verdict is Verdict.RETRY  # no per-turn limit: never a fallback
            self.correction = reason
            return None
        assert not isinstance(turn, Invalid)
        self.policy.accept(seat)
        self.correction = None
        self.lines.append((seat, turn))
        if isinstance(turn, Propose):
            self.proposals[seat] = turn.share
            if None not in self.proposals:
                self.done = True
                return self._result()
        self.turn_seat = 1 - seat
        return None

    def fault(self, seat: Seat, turn: Turn | Invalid) -> tuple[Fault | None, str]:
        """Returns why ``turn`` is refused now, with the correction, or ``(None, "")``."""
        if isinstance(turn, Invalid):
            return fault_of(turn.reason), turn.reason
        if isinstance(turn, Say):
            if self.proposals[1 - seat] is not None:
                return Fault.MESSAGE_AFTER_PROPOSAL, REASONS[Fault.MESSAGE_AFTER_PROPOSAL]
            if self.turn >= self.settings.max_turns:
                limit = self.settings.max_turns
                return Fault.TURN_LIMIT, REASONS[Fault.TURN_LIMIT].format(max_turns=limit)
            return None, ""
        if not any(isinstance(t, Say) for _, t in self.lines):
            return Fault.PROPOSAL_BEFORE_MESSAGE, REASONS[Fault.PROPOSAL_BEFORE_MESSAGE]
        if any(x > n for x, n in zip(turn.share, self.context.counts, strict=True)):
            pool = pool_text(self.context.counts)
            return Fault.COUNTS_ABOVE_TOTAL, REASONS[Fault.COUNTS_ABOVE_TOTAL].format(pool=pool)
        return None, ""

    def _result(self) -> RoundResult:
        counts, values = self.context.counts, self.context.values
        proposals = self.proposals if self.aborted_by is None else [None, None]
        items = item_scores(counts, values, proposals)
        deal = agreed(counts, proposals)
        return RoundResult(
            round=0,
            moves=tuple((s, token_of(t)) for s, t in self.lines),
            payoffs=objective_scores(items, self.settings.lam),
            info={
                "counts": list(counts),
                "values": [list(v) for v in values],
                "lam": self.settings.lam,
                "first": self.first,
                "proposals": [None if p is None else list(p) for p in self.proposals],
                "agreement": deal,
                "item_scores": list(items),
                "end": self.end(deal),
                "aborted": self.aborted_by is not None,
                "aborted_by": self.aborted_by,
                "turns": self.turn,
                "max_turns": self.settings.max_turns,
                "dialogue": [_dialogue_entry(s, t) for s, t in self.lines],
                "corrections": self.corrections,
            },
        )

    def end(self, deal: bool) -> str:
        """Returns how the dialogue ended: ``aborted``, ``agreement`` or ``disagreement``."""
        if self.aborted_by is not None:
            return "aborted"
        return "agreement" if deal else "disagreement"

    def private(self, seat: Seat) -> Any:
        """Returns all ``seat`` knows of the deal: the counts, its own values and whether it
        speaks first."""
        return self.context.counts, self.context.values[seat], self.first == seat

    def scenario(self) -> dict[str, Any]:
        """Returns the context (counts and both seats' values) for the trace."""
        return self.context.to_dict()


def _line(mine: bool, turn: Turn) -> Line:
    if isinstance(turn, Say):
        return Line(mine, Kind.MESSAGE, turn.text)
    return Line(mine, Kind.PROPOSE, render_share(turn.share) if mine else "")


def _dialogue_entry(seat: Seat, turn: Turn) -> dict[str, Any]:
    if isinstance(turn, Say):
        return {"seat": seat, "kind": str(Kind.MESSAGE), "text": turn.text}
    return {"seat": seat, "kind": str(Kind.PROPOSE), "text": render_share(turn.share)}
