"""User-facing errors: messages the CLI prints on one line, without a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class StratagemError(Exception):
    """Base class for every error stratagem raises on purpose."""

    exit_code = 2


class UnknownNameError(StratagemError, KeyError):
    """A game, strategy, pool or backend name that is not registered."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]):
        self.kind, self.name, self.choices = kind, name, sorted(choices)
        hint = did_you_mean(name, self.choices)
        msg = f"unknown {kind} {name!r}{hint}; choose from: {', '.join(self.choices)}"
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
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return f" (did you mean {lowered[match[0]]!r}?)" if match else ""
