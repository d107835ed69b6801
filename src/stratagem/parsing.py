"""Find the action in a model's answer (SPEC §4.1).

Policy: reasoning inside ``<think>…</think>`` is dropped, and everything after an unclosed
``<think>`` is never read. The action is on the last non-empty line; case and surrounding
punctuation do not matter. If that line names two *different* legal actions the answer is
ambiguous and counts as a failure, never a guess. Bracketed vectors (``[2, 0, 1]``) are matched as
vectors, whatever their spacing. ``parse_action`` never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
_VECTOR = re.compile(r"\[\s*(-?\d{1,6}(?:\s*,\s*-?\d{1,6})*)\s*\]")
_MAX_LINE = 4000  # a longer "last line" is prose, not an answer; only its tail is read


@dataclass(frozen=True, slots=True)
class Parsed:
    """The outcome of ``parse_action``: the legal token found, or None with the reason."""

    token: str | None  # the legal token found, or None
    reason: str  # "ok", or why nothing was found: "empty", "no action", "ambiguous: A, B"


def parse_action(text: object, legal: tuple[str, ...]) -> Parsed:
    """The legal token named on the last non-empty line of ``text``, with the reason if none."""
    if not isinstance(text, str) or not legal:
        return Parsed(None, "empty" if not text else "no action")
    line = last_line(visible_text(text))
    if not line:
        return Parsed(None, "empty")
    if legal[0].startswith("["):
        found = [_canonical_vector(m.group(1)) for m in _VECTOR.finditer(line)]
        found = [v for v in found if v in legal]
    else:
        found = [_by_lower(legal)[m.group(1).lower()] for m in _token_regex(legal).finditer(line)]
    distinct = list(dict.fromkeys(found))
    if not distinct:
        return Parsed(None, "no action")
    if len(distinct) > 1:
        return Parsed(None, "ambiguous: " + ", ".join(distinct))
    return Parsed(distinct[0], "ok")


def holds_action(text: str, legal: tuple[str, ...]) -> bool:
    """Returns whether the last non-empty line holds a legal action and no ``<think>`` is open
    (the stopping criterion of SPEC §4.1)."""
    return parse_action(text, legal).token is not None


def visible_text(text: str) -> str:
    """``text`` without closed think blocks and without anything after an unclosed ``<think>``."""
    text = _THINK_BLOCK.sub("\n", text)
    cut = text.lower().find("<think>")
    return text if cut < 0 else text[:cut]


def last_line(text: str) -> str:
    """The last non-empty line, stripped (and capped to its last ``_MAX_LINE`` characters)."""
    end = len(text)
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end].strip()
        if line:
            return line[-_MAX_LINE:]
        end = start - 1
    return ""


def _canonical_vector(body: str) -> str:
    return "[" + ", ".join(str(int(x)) for x in body.split(",")) + "]"


@lru_cache(maxsize=256)
def _by_lower(legal: tuple[str, ...]) -> dict[str, str]:
    return {t.lower(): t for t in legal}


@lru_cache(maxsize=256)
def _token_regex(legal: tuple[str, ...]) -> re.Pattern[str]:
    # longest first so "10" wins over "1"; not glued to letters, digits or a sign/decimal point
    alternatives = "|".join(re.escape(t) for t in sorted(legal, key=len, reverse=True))
    return re.compile(rf"(?<![\w\-.])({alternatives})(?![\w]|\.\d)", re.I)
