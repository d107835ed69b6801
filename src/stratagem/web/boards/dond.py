"""The Deal or No Deal board: the items, the person's own values, the dialogue and a proposal
form; a turn is refused *before* it is submitted when the game's rules refuse it now
(``DondState.fault``), so the person never spends a correction."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, cast

from pydantic import Field, TypeAdapter

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.game import Observation, Seat
from stratagem.web.boards.base import (
    MAX_MESSAGE_CHARS,
    InputError,
    Strict,
    clean_text,
    human,
    register_board,
    shown,
    validate,
    who,
)


class DondMessage(Strict):
    """``{"kind": "message", "text": ...}``: a message to the model."""

    kind: Literal["message"]
    text: str = Field(max_length=MAX_MESSAGE_CHARS)


class DondProposal(Strict):
    """``{"kind": "propose", "books": x, "hats": y, "balls": z}``: the counts the person keeps."""

    kind: Literal["propose"]
    books: int = Field(ge=0, le=100)
    hats: int = Field(ge=0, le=100)
    balls: int = Field(ge=0, le=100)


_DOND_MOVE = TypeAdapter(Annotated[DondMessage | DondProposal, Field(discriminator="kind")])

if TYPE_CHECKING:
    from stratagem.games.dond import DondState


@register_board
class DondBoard:
    """Deal or No Deal: the items, the person's own values, the dialogue, a proposal form."""

    game: ClassVar[str] = "dond"
    kind: ClassVar[str] = "dond"

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the counts, the person's values (never the model's), the objective, the
        dialogue as the person sees it (the model's proposal without its counts, its words
        cleaned like the person's) and which kind of turn is open."""
        from stratagem.games.dond import ITEMS, objective_text

        view = cast("DondState", episode.state).view(seat)
        return {
            "items": [
                {"name": name, "count": count, "value": value}
                for name, count, value in zip(ITEMS, view.counts, view.values, strict=True)
            ],
            "objective": objective_text(view.lam),
            "lam": view.lam,
            "turn": view.turn,
            "max_turns": view.max_turns,
            "first": view.first,
            "dialogue": [
                {"who": who(line.mine), "kind": str(line.kind), "text": shown(line.text)}
                for line in view.dialogue
            ],
            "can_message": not view.must_propose,
            "can_propose": view.discussed,
            "model_proposed": view.other_proposed,
        }

    def outcome(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns how the dialogue ended, both proposals (revealed now), the person's points
        and objective score, and the model's objective score (never its values or points)."""
        result = episode.rounds[-1]
        info = result.info
        aborted = info["aborted_by"]
        return {
            "end": info["end"],
            "agreement": info["agreement"],
            "your_proposal": info["proposals"][seat],
            "model_proposal": info["proposals"][1 - seat],
            "your_points": info["item_scores"][seat],
            "your_score": result.payoffs[seat],
            "model_score": result.payoffs[1 - seat],
            "aborted_by": None if aborted is None else who(aborted == seat),
        }

    def decision(self, episode: Episode, obs: Observation, payload: Any) -> Decision:
        """Returns a ``[message]`` or ``[propose]`` turn; refuses counts above the pool and any
        turn the rules refuse now (a proposal before any message, a message after the model
        proposed or past the turn limit)."""
        from stratagem.games.dond import ITEMS, Propose, Say

        move = validate(_DOND_MOVE, payload)
        state = cast("DondState", episode.state)
        if isinstance(move, DondMessage):
            turn: Say | Propose = Say(clean_text(move.text))
        else:
            share = (move.books, move.hats, move.balls)
            counts = state.context.counts
            if any(x > n for x, n in zip(share, counts, strict=True)):
                pool = ", ".join(f"{n} {name}" for n, name in zip(counts, ITEMS, strict=True))
                raise InputError(f"the pool holds {pool}: you cannot keep more than that")
            turn = Propose(share)
        fault, reason = state.fault(obs.seat, turn)
        if fault is not None:
            raise InputError(_DOND_FAULTS.get(str(fault), reason))
        return human(turn)


_DOND_FAULTS = MappingProxyType(
    {
        "proposal_before_message": "send a message before anyone proposes",
        "message_after_proposal": "the model has proposed: messages are closed, propose now",
        "turn_limit": "the turn limit is reached: messages are closed, submit your proposal",
    }
)
