"""What every board shares: the ``Board`` protocol, the registry of boards by game, and the
checks of the person's input (RELIABILITY I3, I4).

A *board* is the play page's view of one game, for the person's seat only: ``public`` returns the
JSON the page renders (never the model's private values, hidden reasoning or unrevealed moves),
``outcome`` the score screen once the episode is over, and ``decision`` turns the person's
request body into a ``Decision`` — or raises ``InputError`` (HTTP 422) with the episode untouched.
``kind`` names the script of the page that draws it (``static/<kind>.js``).

Input is checked in three layers: a strict pydantic model (exact keys, JSON integers for counts,
numbers for prices, bounded strings: ``10**100``, ``1.5``, ``"2"``, ``true``, prose and lone
surrogates are refused), text cleaning (Unicode NFKC, control and bidi characters removed, at
most ``MAX_MESSAGE_CHARS``), then the game's own rules asked *before* the turn is submitted, so
the person never spends one of the game's corrections: a refused turn changes nothing.

A game's dedicated board registers itself with ``register_board`` (one module per board, listed
in ``boards/__init__.py``); every other registered game is shown by the generic text board.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.game import Observation, Seat
from stratagem.registry import Registry

MAX_MESSAGE_CHARS = 1000
_CONTROL = re.compile("[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f]")


class InputError(ValueError):
    """The person's request is refused (HTTP 422); ``str(error)`` is the one line they see."""


class Board(Protocol):
    """The play page's view of one game, for the person's seat."""

    game: ClassVar[str]  # the game id it shows ("" for a board that shows any game)
    kind: ClassVar[str]  # the page script that draws it

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns what ``seat`` may see of ``episode`` now, as JSON values."""
        ...

    def outcome(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the score screen of a finished ``episode`` for ``seat``."""
        ...

    def decision(self, episode: Episode, obs: Observation, payload: Any) -> Decision:
        """Returns the person's decision at ``obs`` from a request body, or raises
        ``InputError`` (nothing is changed)."""
        ...


BOARDS: Registry[Board] = Registry("game for the play page")
B = TypeVar("B", bound=Board)


def register_board(cls: type[B]) -> type[B]:
    """Class decorator: registers one instance of ``cls`` as the board of ``cls.game``."""
    BOARDS.register(cls(), cls.game)
    return cls


def clean_text(text: str, what: str = "message", *, lines: bool = False) -> str:
    """Returns ``text`` NFKC-normalised, with control and bidi characters removed (line breaks
    become spaces, or stay line breaks with ``lines``); raises ``InputError`` when it is empty or
    longer than ``MAX_MESSAGE_CHARS``.

    Lone surrogates never get here: the strict input models refuse them.
    """
    if len(text) > MAX_MESSAGE_CHARS:
        raise InputError(f"a {what} holds at most {MAX_MESSAGE_CHARS} characters")
    text = shown(text, lines=lines)
    if not text:
        raise InputError(f"the {what} is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise InputError(f"a {what} holds at most {MAX_MESSAGE_CHARS} characters")
    return text


def shown(text: str, *, lines: bool = False) -> str:
    """Returns ``text`` cleaned as ``clean_text`` cleans the person's input (NFKC, control and
    bidi characters removed; line breaks become spaces unless ``lines``), with no limit: how the
    page shows the model's words, so that an override cannot make "evil" read "live"."""
    text = unicodedata.normalize("NFKC", text)
    if lines:  # a free-form answer may need its lines (a code block); the page shows them as text
        parts = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        text = "\n".join(_CONTROL.sub(" ", part).rstrip() for part in parts).strip()
        text = re.sub(r"\n{3,}", "\n\n", text)
    else:
        text = _CONTROL.sub(" ", text).strip()
    return re.sub(r" {2,}", " ", text)


class Strict(BaseModel):
    """Base of the input models: exact keys, strict types, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def validate(adapter: TypeAdapter, payload: Any) -> Any:
    """Returns ``payload`` validated by ``adapter``, or raises ``InputError`` naming the first
    problem (its location and pydantic's message; the input itself is never echoed)."""
    try:
        return adapter.validate_python(payload)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"] if not isinstance(x, int)) or "body"
        raise InputError(f"{where}: {err['msg']}") from None


def who(mine: bool) -> str:
    """Returns how the page names a seat: ``you`` or ``model``."""
    return "you" if mine else "model"


def human(action: Any) -> Decision:
    """Returns the person's decision for ``action`` (marked as theirs in the trace)."""
    return Decision(action, info={"human": True})
