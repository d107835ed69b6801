"""What the rule-based Deal or No Deal negotiators say, and how they read each other (SPEC §7).

Every negotiator speaks one small language, in several wordings:

- a **claim** — the share its writer wants, e.g. ``You get (…) and I ask for (x books, y hats,
  z balls).`` or ``(…) is yours; I want (…).``;
- a **deal** — it accepts the other seat's latest claim, e.g. ``Deal: you get (…) and I get
  (…).``;

Claims and deals spell out both shares, the *reader's* first: so each seat's closing proposal is
the first share of the other seat's last message — the message it has just read, the nearest
share in its context — a share already written in the dialogue that a learner can copy instead
of subtracting counts. (A 135M model that learned from claims naming one share proposed the share
it had just read, for itself; one that learned from deals naming the reader's share first but
claims naming the writer's first proposed the same share from both seats; one that learned the
writer's share first everywhere still proposed the first share of the message it had just read,
not of its own.)
- a **values statement** — e.g. ``My values: a book is worth 2, a hat 1, a ball 3.``

Every wording of a claim, a deal or a values statement is read back by ``claim_in``, ``deal_in``
and ``values_in``; claims are also read, more loosely, from free text (``I want (1 books, 2 hats,
0 balls)``, ``I'd take 1 book, 2 hats and 0 balls``), so the negotiators answer LLM agents too.

Wording is drawn with the decision's seeded rng (deterministic per seed) among the candidate
messages that differ from the writer's previous message, so no negotiator repeats its last
message verbatim.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from stratagem.games.dond import Items, render_share


def _share_pattern(count: str) -> str:
    """A share's pattern, ``(x books, y hats, z balls)``, with ``count`` for each number."""
    return rf"\(?\s*{count}\s*books?\s*,\s*{count}\s*hats?\s*,?\s*(?:and\s+)?{count}\s*balls?\s*\)?"


_SHARE = _share_pattern(r"(\d+)")  # captures the three counts
# a share as written in parentheses, anywhere in a message
_SHARE_ANYWHERE = re.compile(
    r"\(\s*(\d+)\s*books?\s*,\s*(\d+)\s*hats?\s*,?\s*(?:and\s+)?(\d+)\s*balls?\s*\)", re.I
)
_CLAIM = re.compile(
    r"\bI(?:'d|\s+would)?\s+(?:ask\s+for|want|take|get|keep|like|propose\s+to\s+keep)\s*" + _SHARE,
    re.I,
)
# "deal" accepts as an interjection (first, or after punctuation, a quote or a bracket) or
# after an acceptance phrase ("it's a deal", "I accept the deal", "OK, deal"); as a plain noun
# ("We both gain from a good deal.", "Here's the deal:", "No deal") it does not, so the claim
# that follows stays a claim
_ACCEPTANCE = (
    r"(?:(?:^|(?<=[\"'\[\](.,;:!?]))\s*"
    r"|\b(?:it['’]?s|that['’]?s|it is|that is|we['’]?ve got|we have|you['’]?ve got|you have|"
    r"you got|got yourself|i accept|accept)\s+(?:a|the|this|your|our)\s+"
    r"|\b(?:ok|okay|great|fine|sure)[,!.]?\s+)"
)
# a deal names the reader's share after "you get", optionally after the writer's own share
_DEAL = re.compile(
    _ACCEPTANCE
    + r"deal\b[:,!.]?\s+(?:I\s+(?:get|keep|take)\s*(?:the\s+rest\s*)?"
    + _share_pattern(r"\d+")
    + r"\s*[,;]?\s*(?:and\s+|so\s+)?)?you\s+get\s*"
    + _SHARE,
    re.I,
)
_VALUES = re.compile(
    r"(?:my values:|to me,?)\s*a book is worth (\d+), a hat (\d+),? (?:and )?a ball (\d+)", re.I
)

# {s}: a rendered share; every wording must stay readable by the patterns above (tested)
CLAIMS = (
    "You get {rest} and I ask for {s}.",
    "{rest} is yours; I want {s}.",
    "How about this: you keep {rest} and I take {s}.",
    "My offer: you get {rest}, I keep {s}.",
    "You take {rest}, and I would like {s}.",
)
DEALS = (
    "Deal: you get {s} and I get {rest}.",
    "Agreed. Deal, you get {s}; I keep {rest}.",
    "That works for me. Deal! You get {s} and I take {rest}.",
    "Fine by me. Deal. You get {s}, so I keep {rest}.",
)
VALUES = (
    "My values: a book is worth {0}, a hat {1}, a ball {2}.",
    "To be open, to me a book is worth {0}, a hat {1} and a ball {2}.",
    "My values: a book is worth {0}, a hat {1} and a ball {2}. What are yours?",
)


def claim_text(share: Items, rest: Items, wording: int = 0) -> str:
    """Returns the claim message for ``share`` that grants the other seat ``rest`` (the
    complement), in wording ``wording`` (0: the plain one)."""
    return CLAIMS[wording % len(CLAIMS)].format(s=render_share(share), rest=render_share(rest))


def deal_text(their_share: Items, rest: Items, wording: int = 0) -> str:
    """Returns the message accepting the other seat's claim ``their_share``, the writer keeping
    ``rest`` (the complement), in wording ``wording``."""
    return DEALS[wording % len(DEALS)].format(s=render_share(their_share), rest=render_share(rest))


def values_text(values: Items, wording: int = 0) -> str:
    """Returns the statement of one's own values."""
    return VALUES[wording % len(VALUES)].format(*values)


def _share(match: re.Match[str] | None) -> Items | None:
    if match is None:
        return None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def claim_in(message: str) -> Items | None:
    """Returns the share a message claims for its writer (the last claim in it), or None; a deal
    accepts a claim rather than making one, so a deal message claims nothing."""
    if _DEAL.search(message):
        return None
    return _share(next(reversed(list(_CLAIM.finditer(message))), None))


def shares_in(message: str) -> list[Items]:
    """Every share a message writes, ``(n books, n hats, n balls)``, in order."""
    return [(int(a), int(b), int(c)) for a, b, c in _SHARE_ANYWHERE.findall(message)]


def deal_in(message: str) -> Items | None:
    """Returns the share a deal message grants its reader, or None."""
    return _share(_DEAL.search(message))


def values_in(message: str) -> Items | None:
    """Returns the values a message states for its writer, or None."""
    return _share(_VALUES.search(message))


def vary(candidates: Sequence[str], last: str | None, rng: random.Random) -> str:
    """Returns one of ``candidates`` drawn with ``rng``, never ``last`` while another exists.

    Raises:
        ValueError: ``candidates`` is empty.
    """
    if not candidates:
        raise ValueError("no message to choose from")
    fresh = [c for c in dict.fromkeys(candidates) if c != last]
    return rng.choice(fresh or list(candidates))


def compose(preambles: Sequence[str], bodies: Sequence[str]) -> list[str]:
    """Every message a preamble (possibly empty) followed by a body makes."""
    return [" ".join(x for x in (p, b) if x) for p in preambles for b in bodies]
