"""Deal or No Deal turns: ``[message]`` and ``[propose]`` answers, how they are parsed, and the
faults a refused answer is corrected for (seed 002 Table 4, in our own words, plus three of ours).

An answer is read after dropping closed ``<think>`` blocks and must *start* with its prefix (the
paper's rule), rather than carry the action on its last line (SPEC §4.1): a DoND turn is the
message itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from stratagem.game import Invalid
from stratagem.games.dond.contexts import ITEMS, SINGULAR, Items
from stratagem.parsing import visible_text

MAX_FAULTS = 5  # consecutive refused answers of one seat that abort the episode
DEFAULT_MAX_TURNS = 20


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
