"""Deal or No Deal: two seats split books, hats and balls by dialogue (SPEC §7; seed 002 App. A).

A context is the item counts and one private value vector per seat. Seats alternate turns; a turn
is ``[message] text`` or ``[propose] (x books, y hats, z balls)`` (the counts the proposer keeps).
After one seat proposes the other must propose too, and the episode ends: complementary
proposals (summing to the counts) pay each seat its item score ``R_i = values_i · proposal_i``,
anything else pays 0 to both. Seat i's payoff is its objective ``R_i + λ·R_j`` (λ = 1
cooperative, 0 semi-competitive, −1 zero-sum). After ``max_turns`` accepted turns with no
proposal, messages are refused: both seats must propose. One episode is one round.

Proposals are private, as in seed 002: the other seat learns *that* a proposal was submitted,
never its counts. The other seat's messages reach a seat as quoted text (RELIABILITY G5).

Refused answers are corrected through the shared policy (``games.corrections``): no limit per
turn, and five consecutive refused answers of one seat abort the episode with 0 for both (seed
002 App. A). The seven faults of seed 002 Table 4 are checked, in our own words; three are ours:
a proposal that is not three whole counts, a message after the turn limit, and an answer refused
before it reached the game (an ``Invalid`` from elsewhere).

Contexts (SPEC §7): counts ≥ 1 each, 5–7 items in all; each value vector non-negative with
``Σ count·value = 10``; every item type valued by at least one seat; no division gives both seats
10. All such ordered pairs are enumerated once and drawn by seed; a file in the original DoND
context format can replace them (``contexts=PATH``), each loaded context checked.

Departures: the paper samples from the 4,186 contexts of the original release; we enumerate every
context its criteria allow (5,793 ordered pairs) unless a file is given. An answer is read after
dropping closed ``<think>`` blocks and must *start* with its prefix (the paper's rule), rather
than carry the action on its last line (SPEC §4.1): a DoND turn is the message itself.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from stratagem.errors import ConfigError, GameError, UnknownNameError
from stratagem.game import Invalid, Observation, RoundResult, Seat, check_prompt_style
from stratagem.games.corrections import Corrections, Verdict, correction_text
from stratagem.games.quoting import quote
from stratagem.games.registry import GAMES
from stratagem.parsing import visible_text
from stratagem.seeding import derive

Items = tuple[int, int, int]  # books, hats, balls

ITEMS = ("books", "hats", "balls")
SINGULAR = ("book", "hat", "ball")
TOTAL_VALUE = 10  # every seat's items are worth this much to it in all
MIN_ITEMS, MAX_ITEMS = 5, 7  # items in the pool
MAX_FAULTS = 5  # consecutive refused answers of one seat that abort the episode
DEFAULT_MAX_TURNS = 20
OBJECTIVES = MappingProxyType({"coop": 1.0, "semi": 0.0, "comp": -1.0})  # name -> λ


class Kind(StrEnum):
    """The two kinds of turn; the value is the answer's prefix without brackets."""

    MESSAGE = "message"
    PROPOSE = "propose"


class Fault(StrEnum):
    """Why an answer was refused: seed 002 Table 4's seven faults, then three of ours."""

    MISSING_PREFIX = "missing_prefix"
    PROPOSAL_BEFORE_MESSAGE = "proposal_before_message"
    SEVERAL_PREFIXES = "several_prefixes"
    MESSAGE_AFTER_PROPOSAL = "message_after_proposal"
    ITEMS_OUT_OF_ORDER = "items_out_of_order"
    TOO_MANY_COUNTS = "too_many_counts"
    COUNTS_ABOVE_TOTAL = "counts_above_total"
    MALFORMED_PROPOSAL = "malformed_proposal"
    TURN_LIMIT = "turn_limit"
    OTHER = "other"


# the correction each fault sends back (as the reason of ``correction_text``); the two that name
# the context are filled in by the state
REASONS: Mapping[Fault, str] = MappingProxyType(
    {
        Fault.MISSING_PREFIX: "an answer has to start with [message] or with [propose]",
        Fault.PROPOSAL_BEFORE_MESSAGE: (
            "nobody has sent a message yet; talk about how to split the items with a [message] "
            "before anyone submits a proposal"
        ),
        Fault.SEVERAL_PREFIXES: (
            "write [message] or [propose] once, at the very start, and never again in the same "
            "answer; send a single message per turn"
        ),
        Fault.MESSAGE_AFTER_PROPOSAL: (
            "the other player has submitted its proposal, so messages are closed; answer with "
            "your own proposal, starting with [propose]"
        ),
        Fault.ITEMS_OUT_OF_ORDER: (
            "list the counts in the order books, hats, balls, as in "
            "[propose] (x books, y hats, z balls)"
        ),
        Fault.TOO_MANY_COUNTS: (
            "a proposal holds exactly three counts, one each for books, hats and balls"
        ),
        Fault.COUNTS_ABOVE_TOTAL: ("you asked for more items than the pool holds, which is {pool}"),
        Fault.MALFORMED_PROPOSAL: (
            "write a proposal as [propose] (x books, y hats, z balls), with x, y and z the whole "
            "numbers of books, hats and balls you keep"
        ),
        Fault.TURN_LIMIT: (
            "the limit of {max_turns} turns is reached, so messages are closed; submit your "
            "proposal, starting with [propose]"
        ),
    }
)
_FAULT_OF_REASON = {text: fault for fault, text in REASONS.items()}

# ---- contexts ----


@dataclass(frozen=True, slots=True)
class Context:
    """The item counts and each seat's private values (books, hats, balls)."""

    counts: Items
    values: tuple[Items, Items]

    def to_dict(self) -> dict[str, Any]:
        """Returns ``{"counts": [...], "values": [[...], [...]]}`` (the trace's scenario)."""
        return {"counts": list(self.counts), "values": [list(v) for v in self.values]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Context:
        """Returns the context a ``to_dict`` mapping holds.

        Raises:
            ConfigError: the mapping lacks three counts or two vectors of three values.
        """
        try:
            counts = _items(data["counts"])
            values = (_items(data["values"][0]), _items(data["values"][1]))
        except (KeyError, IndexError, TypeError, ValueError):
            raise ConfigError(
                "dond: a scenario is {'counts': [b, h, c], 'values': [[...], [...]]}"
            ) from None
        if len(data["values"]) != 2:
            raise ConfigError("dond: a scenario has exactly two value vectors")
        return cls(counts, values)


def _items(xs: Sequence[Any]) -> Items:
    if len(xs) != 3 or not all(isinstance(x, int) and not isinstance(x, bool) for x in xs):
        raise ValueError("three integers")
    return (xs[0], xs[1], xs[2])


def score(values: Items, share: Items) -> int:
    """Returns the value of ``share`` (counts of books, hats, balls) under ``values``."""
    return sum(v * n for v, n in zip(values, share, strict=True))


def complement(counts: Items, share: Items) -> Items:
    """Returns what is left of ``counts`` when one seat keeps ``share``."""
    return (counts[0] - share[0], counts[1] - share[1], counts[2] - share[2])


def divisions(counts: Items) -> Iterator[Items]:
    """Every share one seat may keep (each count from 0 to what exists), books slowest."""
    yield from itertools.product(*(range(n + 1) for n in counts))  # type: ignore[misc]


def context_problems(ctx: Context) -> list[str]:
    """Returns the SPEC §7 criteria ``ctx`` breaks (empty when it is valid).

    The last criterion, "no division gives both seats 10", is checked as "some item type is
    valued by both seats": a seat scores 10 exactly when it gets every unit it values, so both can
    only when no type is valued by both (``tests/games/test_dond.py`` checks the equivalence
    against the divisions themselves).
    """
    problems = []
    counts, (a, b) = ctx.counts, ctx.values
    if min(counts) < 1 or not MIN_ITEMS <= sum(counts) <= MAX_ITEMS:
        problems.append(
            f"counts {list(counts)}: each must be at least 1, {MIN_ITEMS}-{MAX_ITEMS} in all"
        )
    for seat, values in enumerate((a, b)):
        if min(values) < 0:
            problems.append(f"seat {seat} has a negative value")
        elif score(values, counts) != TOTAL_VALUE:
            problems.append(f"seat {seat}'s items are worth {score(values, counts)}, not 10")
    if any(x == 0 and y == 0 for x, y in zip(a, b, strict=True)):
        problems.append("an item type is worth nothing to both seats")
    if not any(x > 0 and y > 0 for x, y in zip(a, b, strict=True)):
        problems.append("a division gives both seats 10 (no item type is valued by both)")
    return problems


@functools.cache
def all_contexts() -> tuple[Context, ...]:
    """Every valid context (ordered pairs of value vectors), enumerated once, in a fixed order."""
    out = []
    for counts in itertools.product(range(1, MAX_ITEMS + 1), repeat=3):
        if not MIN_ITEMS <= sum(counts) <= MAX_ITEMS:
            continue
        vectors = [
            v
            for v in itertools.product(range(TOTAL_VALUE + 1), repeat=3)
            if score(v, counts) == TOTAL_VALUE  # type: ignore[arg-type]
        ]
        for a, b in itertools.product(vectors, repeat=2):
            ctx = Context(counts, (a, b))  # type: ignore[arg-type]
            if not context_problems(ctx):
                out.append(ctx)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class LoadedContexts:
    """The contexts of a file in the original DoND format, and those that failed, by line."""

    contexts: tuple[Context, ...]
    failures: tuple[str, ...]  # "lines 3-4: reason", one per failed context


def load_contexts(path: str | Path) -> LoadedContexts:
    """Reads a context file of the original DoND release and checks every context.

    Each non-empty line is one seat's view, six integers ``count value count value count value``
    (books, hats, balls); consecutive lines are the two views of one game and must show the same
    counts. A pair that is malformed or breaks a criterion is a failure (left out, reported).

    Raises:
        ConfigError: the file cannot be read.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"dond: cannot read the context file {path}: {exc}") from None
    lines = [(i, line.split()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    contexts, failures = [], []
    for k in range(0, len(lines), 2):
        pair = lines[k : k + 2]
        where = "-".join(str(i) for i, _ in pair)
        if len(pair) < 2:
            failures.append(f"line {where}: the second view of this game is missing")
            continue
        try:
            views = [[int(x) for x in words] for _, words in pair]
        except ValueError:
            failures.append(f"lines {where}: not integers")
            continue
        if any(len(v) != 6 for v in views):
            failures.append(f"lines {where}: each line needs six integers")
            continue
        counts = [tuple(v[0::2]) for v in views]
        if counts[0] != counts[1]:
            failures.append(f"lines {where}: the two views show different counts")
            continue
        ctx = Context(counts[0], (tuple(views[0][1::2]), tuple(views[1][1::2])))  # type: ignore[arg-type]
        problems = context_problems(ctx)
        if problems:
            failures.append(f"lines {where}: " + "; ".join(problems))
        else:
            contexts.append(ctx)
    return LoadedContexts(tuple(contexts), tuple(failures))


# ---- turns and parsing ----


@dataclass(frozen=True, slots=True)
class Say:
    """A ``[message]`` turn."""

    text: str


@dataclass(frozen=True, slots=True)
class Propose:
    """A ``[propose]`` turn: the counts of books, hats and balls the proposer keeps."""

    share: Items


Turn = Say | Propose
_PREFIX = re.compile(r"\[\s*(message|propose)\s*\]", re.I)
_GROUP = re.compile(r"\(([^()]*)\)")
_COUNT = re.compile(r"(-?\d+(?:\.\d+)?)\s*([A-Za-z]*)")
_MAX_DIGITS = 6  # a longer count is above any pool; never build a huge int


def render_share(share: Items) -> str:
    """Returns ``(x books, y hats, z balls)``, the proposal format."""
    return f"({share[0]} books, {share[1]} hats, {share[2]} balls)"


def parse_turn(text: str) -> Turn | Invalid:
    """Returns the turn a model's answer holds, or ``Invalid`` with the correction to send.

    Closed ``<think>`` blocks are dropped (an unclosed one hides the rest). The answer must start
    with ``[message]`` or ``[propose]`` (any case) and name no prefix again; a proposal is three
    whole counts, read from its first parenthesised group (else the whole answer), each optionally
    followed by its item's name — named items must come as books, hats, balls.
    """
    answer = visible_text(text).strip()
    head = _PREFIX.match(answer)
    if head is None:
        return _invalid(Fault.MISSING_PREFIX)
    body = answer[head.end() :]
    if _PREFIX.search(body):
        return _invalid(Fault.SEVERAL_PREFIXES)
    if head.group(1).lower() == Kind.MESSAGE:
        return Say(body.strip())
    group = _GROUP.search(body)
    found = _COUNT.findall(group.group(1) if group else body)
    if len(found) > 3:
        return _invalid(Fault.TOO_MANY_COUNTS)
    if len(found) < 3 or not all(n.isdigit() for n, _ in found):
        return _invalid(Fault.MALFORMED_PROPOSAL)
    names = [_item_index(word) for _, word in found]
    if -1 in names:
        return _invalid(Fault.MALFORMED_PROPOSAL)
    if any(i is not None and i != position for position, i in enumerate(names)):
        return _invalid(Fault.ITEMS_OUT_OF_ORDER)
    share = tuple(int(n) if len(n) <= _MAX_DIGITS else 10**_MAX_DIGITS for n, _ in found)
    return Propose(share)  # type: ignore[arg-type]


def _item_index(word: str) -> int | None:
    """0, 1, 2 for books, hats, balls (singular or plural), None for no word, -1 otherwise."""
    if not word:
        return None
    word = word.lower()
    for i, (plural, singular) in enumerate(zip(ITEMS, SINGULAR, strict=True)):
        if word in (plural, singular):
            return i
    return -1


def _invalid(fault: Fault) -> Invalid:
    return Invalid(REASONS[fault])


def fault_of(reason: str) -> Fault:
    """Returns the fault whose correction is ``reason`` (``OTHER`` for a refusal made outside
    the game, such as an agent's "no action found")."""
    return _FAULT_OF_REASON.get(reason, Fault.OTHER)


def token_of(turn: Turn | Invalid) -> str:
    """Returns a turn as it is written (``[message] ...`` / ``[propose] (...)``), or
    ``invalid: reason``."""
    if isinstance(turn, Invalid):
        return f"invalid: {turn.reason}"
    if isinstance(turn, Propose):
        return f"[{Kind.PROPOSE}] {render_share(turn.share)}"
    return f"[{Kind.MESSAGE}] {turn.text}" if turn.text else f"[{Kind.MESSAGE}]"


# ---- scores ----


def item_scores(
    counts: Items, values: Sequence[Items], proposals: Sequence[Items | None]
) -> tuple[int, int]:
    """Returns each seat's item score: its own value of its own proposal when the proposals are
    complementary (sum to ``counts``), else 0 for both."""
    if not agreed(counts, proposals):
        return 0, 0
    return score(values[0], proposals[0]), score(values[1], proposals[1])  # type: ignore[arg-type]


def agreed(counts: Items, proposals: Sequence[Items | None]) -> bool:
    """Whether both seats proposed and their proposals sum to ``counts``."""
    a, b = proposals
    return (
        a is not None
        and b is not None
        and all(x + y == n for x, y, n in zip(a, b, counts, strict=True))
    )


def objective_scores(items: tuple[int, int], lam: float) -> tuple[float, float]:
    """Returns the payoffs ``R_i + λ·R_j`` of the two seats from their item scores."""
    r0, r1 = items
    return float(r0 + lam * r1), float(r1 + lam * r0)


def payoff_bounds(lam: float) -> tuple[float, float]:
    """Returns the range of ``R_i + λ·R_j`` with both item scores in [0, 10]."""
    return min(0.0, TOTAL_VALUE * lam), TOTAL_VALUE + max(0.0, TOTAL_VALUE * lam)


# ---- what a seat sees ----


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
            game=Dond.name,
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
            pool = _pool(self.context.counts)
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


# ---- the game ----


@GAMES
class Dond:
    """Deal or No Deal with the objective ``R_i + λ·R_j`` (SPEC §7; seed 002)."""

    name = "dond"
    version = 1

    def __init__(
        self,
        *,
        lam: float | None = None,
        objective: str | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        prompt_style: str = "chat",
        contexts: str | None = None,
    ):
        """Builds the game; ``params`` holds the resolved values (``objective`` becomes ``lam``).

        Args:
            lam: λ in [−1, 1]: each seat's payoff is ``R_i + λ·R_j`` (default 0).
            objective: ``coop`` (λ = 1), ``semi`` (λ = 0) or ``comp`` (λ = −1), instead of λ.
            max_turns: accepted turns before messages close and both seats must propose.
            prompt_style: ``chat`` (a user turn holds what is new) or ``single`` (the dialogue).
            contexts: None for every valid context, or the path of a context file in the
                original DoND format (contexts failing the criteria are left out, with a warning).

        Raises:
            ConfigError: a bad value, a λ that contradicts ``objective``, or a context file with
                no valid context.
        """
        lam = resolve_lam(lam, objective)
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
            raise ConfigError("dond: max_turns must be an integer of at least 1")
        if isinstance(contexts, Path):
            contexts = str(contexts)
        if contexts is not None and not isinstance(contexts, str):
            raise ConfigError("dond: contexts must be None or the path of a context file")
        self.settings = Settings(lam, max_turns, check_prompt_style(prompt_style))
        self.payoff_bounds = payoff_bounds(lam)
        self.context_failures: tuple[str, ...] = ()
        if contexts is None:
            self.contexts = all_contexts()
        else:
            loaded = load_contexts(contexts)
            self.contexts, self.context_failures = loaded.contexts, loaded.failures
            if not self.contexts:
                raise ConfigError(f"dond: no valid context in {contexts}: {loaded.failures[:3]}")
            if self.context_failures:
                warnings.warn(
                    f"dond: {len(self.context_failures)} of "
                    f"{len(self.contexts) + len(self.context_failures)} contexts in {contexts} "
                    f"fail the criteria and are left out (first: {self.context_failures[0]})",
                    stacklevel=2,
                )
        self._params = MappingProxyType(
            {"lam": lam, "max_turns": max_turns, "prompt_style": prompt_style, "contexts": contexts}
        )

    @property
    def params(self) -> Mapping[str, Any]:
        """The game's parameters (JSON values); ``get_game("dond", **params)`` rebuilds it."""
        return self._params

    @property
    def lam(self) -> float:
        """λ of the objective ``R_i + λ·R_j``."""
        return self.settings.lam

    def new_episode(self, seed: int) -> DondState:
        """Returns a dialogue on a context drawn from ``seed`` (first speaker drawn too)."""
        context = random.Random(derive(seed, "context")).choice(self.contexts)
        return DondState(context, seed, self.settings)

    def from_scenario(self, scenario: Context | Mapping[str, Any], seed: int) -> DondState:
        """Returns a dialogue on ``scenario`` (a ``Context`` or its dict form).

        Raises:
            ConfigError: the scenario is malformed or breaks the context criteria.
        """
        ctx = scenario if isinstance(scenario, Context) else Context.from_dict(scenario)
        problems = context_problems(ctx)
        if problems:
            raise ConfigError(f"dond: invalid scenario: {'; '.join(problems)}")
        return DondState(ctx, seed, self.settings)

    def parse(self, text: str, legal: tuple[str, ...] = ()) -> Turn | Invalid:
        """Returns the turn in a model's answer, or ``Invalid(reason)`` to send back."""
        return parse_turn(text)

    def token(self, action: Turn | Invalid) -> str:
        """Returns the turn as written (what traces store), or ``invalid: reason``."""
        return token_of(action)

    def answer_text(self, action: Turn | Invalid) -> str:
        """Returns a well-formed answer that parses to ``action`` (its written form)."""
        return token_of(action)

    def sample_action(self, obs: Observation, rng: random.Random) -> Turn:
        """Returns a random turn valid at ``obs``, from public facts only (the counts, the turn):
        a proposal when one is due, a message before any was sent, else either."""
        view: DondView = obs.view
        share = tuple(rng.randint(0, n) for n in view.counts)
        if view.must_propose or (view.discussed and rng.random() < 0.25):
            return Propose(share)  # type: ignore[arg-type]
        chatter = (
            "Hello! How shall we split these?",
            f"I would like to keep {render_share(share)}.",  # type: ignore[arg-type]
            "Which items matter most to you?",
            "That does not work for me.",
            "Fine, let us settle it.",
        )
        return Say(rng.choice(chatter))

    def metrics(self, traces: Sequence[Any]) -> dict[str, Any]:
        """Returns the DoND metrics of the agent in ``trace.meta["seat"]`` (``metrics.dond``)."""
        from stratagem.metrics.dond import dond_metrics

        return dond_metrics(traces)


def resolve_lam(lam: Any, objective: str | None) -> float:
    """Returns λ from ``lam`` or the named ``objective`` (0, semi-competitive, by default).

    Raises:
        ConfigError: λ is not a number in [−1, 1], the objective is unknown, or both are given
            and disagree.
    """
    if objective is not None:
        if objective not in OBJECTIVES:
            raise UnknownNameError("dond objective", str(objective), OBJECTIVES)
        if lam is not None and lam != OBJECTIVES[objective]:
            raise ConfigError(
                f"dond: objective {objective} means lam={OBJECTIVES[objective]:g}, not {lam}"
            )
        lam = OBJECTIVES[objective]
    if lam is None:
        return 0.0
    if isinstance(lam, bool) or not isinstance(lam, int | float) or not math.isfinite(lam):
        raise ConfigError(f"dond: lam must be a number in [-1, 1], got {lam!r}")
    if not -1.0 <= lam <= 1.0:
        raise ConfigError(f"dond: lam must be in [-1, 1], got {lam}")
    return float(lam)


# ---- prompts ----


def objective_text(lam: float) -> str:
    """Returns how a seat's score is computed under λ, in words."""
    own = "the value, to you, of the items you receive"
    theirs = "the value, to the other player, of the items it receives"
    if lam == 0:
        return f"Your score is {own}. Aim for the highest score you can get."
    if lam == 1:
        return (
            f"Your score is {own} plus {theirs}. The other player's score is the same sum, so "
            "you are on the same side: aim for the highest total."
        )
    if lam == -1:
        return (
            f"Your score is {own} minus {theirs}. Whatever the other player gains, you lose: "
            "aim to come out ahead."
        )
    sign = "plus" if lam > 0 else "minus"
    return f"Your score is {own} {sign} {abs(lam):g} times {theirs}. Aim for the highest score."


def _pool(counts: Items) -> str:
    named = [f"{n} {SINGULAR[i] if n == 1 else ITEMS[i]}" for i, n in enumerate(counts)]
    return f"{named[0]}, {named[1]} and {named[2]}"


def system_prompt(view: DondView) -> str:
    """Returns the seat's system turn: the game, the pool, its own values (only), its objective,
    the turn rules and the answer format."""
    b, h, c = view.values
    return (
        "You are negotiating with another player over how to split a shared pool of items: "
        f"{_pool(view.counts)}. Each of you privately values the items; you do not know the "
        "other player's values and it does not know yours.\n"
        f"Your values: a book is worth {b}, a hat {h} and a ball {c} points to you, so the "
        f"whole pool is worth {TOTAL_VALUE} points to you.\n"
        f"{objective_text(view.lam)}\n"
        "How the game goes: you take turns. On your turn you either send the other player a "
        "message or submit a proposal: the items you keep. A proposal stays hidden from the "
        "other player. As soon as one of you has proposed, the other must propose too, and the "
        "game ends. If the two proposals add up exactly to the whole pool, each of you receives "
        "the items you proposed; otherwise nobody receives anything. Discuss first: nobody may "
        f"propose before a message was sent, and after {view.max_turns} turns messages close "
        "and both of you must propose.\n"
        "Answer format: your whole answer is either\n"
        "[message] your message to the other player\n"
        "or\n"
        "[propose] (x books, y hats, z balls)\n"
        "where x, y and z are the numbers of books, hats and balls you keep, in that order, "
        "as whole numbers. Write [message] or [propose] once, at the start. An answer that "
        f"breaks these rules is sent back for correction; {MAX_FAULTS} faulty answers in a row "
        "end the game with 0 points for both."
    )


def _status(view: DondView) -> str:
    if view.other_proposed:
        return "Now submit your own proposal: [propose] (x books, y hats, z balls)."
    if view.turn >= view.max_turns:
        return (
            f"The limit of {view.max_turns} turns is reached: submit your proposal now with "
            "[propose] (x books, y hats, z balls)."
        )
    return (
        f"Turn {view.turn + 1} of {view.max_turns}. Your answer: [message] ... or "
        "[propose] (x books, y hats, z balls)."
    )


def _said(line: Line) -> str:
    if line.kind is Kind.MESSAGE:
        return f"{'You' if line.mine else 'The other player'} wrote: {quote(line.text)}"
    if line.mine:
        return f"You proposed to keep {line.text}."
    return "The other player submitted its proposal (hidden from you until the end)."


def new_prompt(view: DondView) -> str:
    """Returns the chat user turn: the other seat's turns since this seat spoke, then what to
    do now."""
    lines = [_said(line) for line in view.new]
    if not view.dialogue:
        lines.append("The negotiation starts and you speak first.")
    return "\n".join([*lines, _status(view)])


def full_prompt(view: DondView) -> str:
    """Returns the single-turn prompt: the whole dialogue so far, what to do now and, when
    answering again, the correction."""
    lines = ["The dialogue so far:" if view.dialogue else "The negotiation starts."]
    lines += [_said(line) for line in view.dialogue]
    if not view.dialogue:
        lines.append("You speak first.")
    lines.append(_status(view))
    if view.correction is not None:
        lines.append(correction_text(view.correction, view.attempt))
    return "\n".join(lines)
