"""Text from the other seat, shown as data: one quoted line that cannot forge the engine's own
lines (RELIABILITY G5). Shared by the free-form games (bargaining, Deal or No Deal)."""

from __future__ import annotations

import unicodedata

# quotes and look-alikes a message could use to seem to close its own quotation
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_QUOTE_LIKE = frozenset("\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb\u301d\u301e\u301f\uff02")
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})  # controls, format, separators


def quote(text: str) -> str:
    """Returns ``text`` as one double-quoted line: backslashes, quotes, quote look-alikes, line
    breaks and every control or format character escaped, JSON-style."""
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch in _QUOTE_LIKE or unicodedata.category(ch) in _UNPRINTABLE:
            code = ord(ch)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
