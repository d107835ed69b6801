"""The generic text board: any registered game, shown as a model in the person's seat would see
it, through the public ``Observation`` / ``Episode`` / ``RoundResult`` interfaces only.

The person reads the rules of their seat (``Observation.rules``: the rules and their own private
information, nothing of the other seat's — the conformance suite checks every game for that),
their conversation so far (the game's prompts and their own answers, ``Episode.chat``), and the
prompt that asks for the current turn. A token turn (``Observation.legal`` non-empty) is one
button per legal token; a free-form turn (``legal`` empty) is a text answer that the game parses
as it would a model's (``Game.parse``), refused with the game's own reason when it cannot be
read, before anything is submitted. A turn the game reads but its rules then refuse (the state
asks for a correction) is the game's to handle, as for a model: the correction is the next
prompt, shown as such.

Finished rounds show the person's own moves and points only: another seat's moves and payoffs
can reveal its private values (a sealed bid, a reservation price), and what a seat may learn of
them is said by the game's own prompts.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, TypeAdapter

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.game import Invalid, Observation, Seat
from stratagem.web.boards.base import (
    MAX_MESSAGE_CHARS,
    InputError,
    Strict,
    clean_text,
    human,
    validate,
    who,
)

MAX_TOKEN_CHARS = 200


class TokenTurn(Strict):
    """``{"action": TOKEN}``: one of the legal action tokens."""

    action: str = Field(max_length=MAX_TOKEN_CHARS)


class TextTurn(Strict):
    """``{"text": ...}``: a free-form answer, parsed by the game."""

    text: str = Field(max_length=MAX_MESSAGE_CHARS)


_TOKEN = TypeAdapter(TokenTurn)
_TEXT = TypeAdapter(TextTurn)


class TextBoard:
    """Any registered game: its rules and prompts as text, buttons or a text answer."""

    game: ClassVar[str] = ""
    kind: ClassVar[str] = "text"

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the game's name, the rules ``seat`` reads, its conversation (prompts and its
        own answers), the open prompt when it must answer now, and its own moves and points of
        the finished rounds."""
        obs = _waiting(episode, seat)
        rules = obs.rules if obs is not None else episode.rules(seat)
        rounds = [{"you": r.actions(seat), "your_points": r.payoffs[seat]} for r in episode.rounds]
        return {
            "title": episode.game.name,
            "rules": rules,
            "chat": [
                {"who": "game" if m.role == "user" else who(True), "text": m.content}
                for m in episode.chat(seat)
            ],
            "prompt": obs.prompt if obs is not None else None,
            "free_form": obs is not None and obs.free_form,
            "correction": obs is not None and obs.attempt > 0,
            "rounds": rounds,
            "your_total": sum(r["your_points"] for r in rounds),
        }

    def outcome(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the rounds played and the person's total (never the model's: it can reveal
        the model's private values)."""
        return {
            "rounds": len(episode.rounds),
            "your_total": sum(r.payoffs[seat] for r in episode.rounds),
        }

    def decision(self, episode: Episode, obs: Observation, payload: Any) -> Decision:
        """Returns a legal token's action (``{"action": ...}``) or a free-form answer the game
        reads (``{"text": ...}``); refuses another token, an answer the game cannot read, or one
        it refuses (its reason is the message)."""
        if obs.legal:
            token = validate(_TOKEN, payload).action
            if token not in obs.legal:
                raise InputError(f"action: choose one of {', '.join(obs.legal)}")
            text = token
        else:
            text = clean_text(validate(_TEXT, payload).text, "answer", lines=True)
        action = episode.game.parse(text, obs.legal)
        if isinstance(action, Invalid):
            raise InputError(action.reason)
        if action is None:
            raise InputError("the game cannot read this answer: follow the format in the rules")
        return human(action)


def _waiting(episode: Episode, seat: Seat) -> Observation | None:
    """Returns ``seat``'s observation when it must answer now, else None."""
    return next((obs for obs in episode.waiting() if obs.seat == seat), None)
