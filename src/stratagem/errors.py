"""User-facing errors: messages the CLI prints on one line, without a traceback."""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable
from typing import Any

SHOWN_CHARS = 120  # the most of a rejected input an error message quotes


class StratagemError(Exception):
    """Base class for every error stratagem raises on purpose."""

    exit_code = 2


class UnknownNameError(StratagemError, KeyError):
    """A game, strategy, pool or backend name that is not registered."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]):
        self.kind, self.name, self.choices = kind, name, sorted(choices)
        hint = did_you_mean(name, self.choices)
        msg = f"unknown {kind} {shown(name)}{hint}; choose from: {', '.join(self.choices)}"
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


class ConfigError(StratagemError, ValueError):
    """A bad configuration value or combination of values."""


class ConfigDriftError(ConfigError):
    """Resuming a run folder with settings that change its outputs."""


class IncompleteRunError(StratagemError):
    """A run that finished with failed episodes: its coverage line, exit 1 (a rerun retries
    them)."""

    exit_code = 1


class GameError(StratagemError, RuntimeError):
    """An agent or caller broke the rules of a game (an illegal action, acting out of turn)."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'X'?)"`` for the closest choice, or an empty string."""
    lowered = {c.lower(): c for c in choices}
    if len(name) > 4 * SHOWN_CHARS:  # no name is that long; matching it would only cost time
        return ""
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return f" (did you mean {lowered[match[0]]!r}?)" if match else ""


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = SHOWN_CHARS // 2
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple = 3, 4, 6, 6


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """Returns ``repr(value)`` cut to at most ``limit`` characters, for quoting a rejected input in
    a one-line error: containers are elided as they are walked (a value of any size costs a
    bounded time), and an integer too long to print is named by its digit count."""
    try:
        text = _REPR.repr(value)
    except ValueError:  # an int beyond the interpreter's digit limit for str()
        text = f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # no lone surrogates
    return text if len(text) <= limit else text[: limit - 1] + "…"
