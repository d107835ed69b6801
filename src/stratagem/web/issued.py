"""Participant ids the operator issues (``stratagem serve --issue``, served with
``--issued-ids``): a participant's link carries ``?pid=ID.CODE``, where ``CODE`` is 10 base32
characters (50 bits) of an HMAC-SHA256 of ``ID`` under a key derived from the server's session
key. Knowing someone's id is then not enough to see or extend their record: an id without its
code, or with another, is refused (and every attempt counts against the join rate limits), and
the page shows a participant's games across browsers only to the holder of the code.

Codes need no list on the server: the key alone checks them, so the operator may issue more at
any time (``--issue P051-P100``) from the same ``--db`` (or the same ``$STRATAGEM_SESSION_KEY``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

from stratagem.errors import ConfigError
from stratagem.web.errors import Forbidden
from stratagem.web.study import PARTICIPANT, participant_id

CODE_CHARS = 10
MAX_ISSUED = 100_000  # the most ids one --issue prints
MAX_ID_CHARS = 64 - 1 - CODE_CHARS  # an id and its code fit a participant id (64 characters)
_RANGE = re.compile(r"(?P<prefix>[A-Za-z][A-Za-z._-]*)?(?P<first>\d+)-(?P=prefix)?(?P<last>\d+)")


def _participant_key(key: bytes) -> bytes:
    """The key of participant codes: derived from the session key, never the key itself."""
    return hmac.new(key, b"stratagem participant ids", hashlib.sha256).digest()


def code_of(key: bytes, pid: str) -> str:
    """Returns the code of participant ``pid`` under the server's session ``key``."""
    mac = hmac.new(_participant_key(key), pid.encode(), hashlib.sha256).digest()
    return base64.b32encode(mac).decode().lower()[:CODE_CHARS]


def issued_id(key: bytes, value: object) -> str:
    """Returns the participant id an issued ``ID.CODE`` names (the code compared in constant
    time, case-insensitively).

    Raises:
        InputError: ``value`` is not a participant id at all.
        Forbidden: it has no code, or not this id's.
    """
    text = participant_id(value)
    pid, dot, code = text.rpartition(".")
    if not dot or not pid or not hmac.compare_digest(code.lower(), code_of(key, pid)):
        raise Forbidden(
            "this participant id is not one issued for this study; use the link you were given"
        )
    return pid


def issue_ids(spec: str) -> list[str]:
    """Returns the ids ``spec`` names: ``N`` (``P001`` to ``PN``, at least three digits) or a
    range ``FIRST-LAST`` such as ``P051-P100`` (the digits of ``FIRST`` set the width).

    Raises:
        ConfigError: anything else, an empty range, more than 100,000 ids, or ids too long to
            carry a code.
    """
    text = spec.strip()
    if text.isdigit():
        count = int(text)
        prefix, first, last, width = "P", 1, count, max(3, len(text))
    elif match := _RANGE.fullmatch(text):
        prefix, first, last = match["prefix"] or "", int(match["first"]), int(match["last"])
        width = len(match["first"])
    else:
        raise ConfigError(f"--issue {spec[:40]!r}: give a count (50) or a range (P051-P100)")
    if not 1 <= last - first + 1 <= MAX_ISSUED:
        raise ConfigError(f"--issue {text[:40]}: give 1 to {MAX_ISSUED:,} ids")
    ids = [f"{prefix}{n:0{width}d}" for n in range(first, last + 1)]
    if len(ids[-1]) > MAX_ID_CHARS or not PARTICIPANT.fullmatch(ids[-1]):
        raise ConfigError(f"--issue {text[:40]}: ids are at most {MAX_ID_CHARS} characters")
    return ids


def issued_links(key: bytes, ids: list[str], url: str) -> str:
    """Returns a CSV of ``participant,code,link`` (a header, then one line per id) for the page at
    ``url``."""
    lines = ["participant,code,link"]
    for pid in ids:
        code = code_of(key, pid)
        lines.append(f"{pid},{code},{url}/?pid={pid}.{code}")
    return "\n".join(lines)
