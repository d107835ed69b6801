"""The bargaining board: the item and price range, the person's role and reservation value, the
public log, and offer / message / accept / reject / quit controls; a turn is checked by the
game's own tool validator and protocol (``BargainingState.protocol_error``) before it is
submitted."""

from __future__ import annotations

import math
from collections.abc import Mapping
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

if TYPE_CHECKING:
    from stratagem.games.bargaining import BargainingState


class _Bargain(Strict):
    message: str | None = Field(None, max_length=MAX_MESSAGE_CHARS)


class BargainOffer(_Bargain):
    """``{"kind": "offer", "price": p, "message"?: ...}``: list or offer at ``p``."""

    kind: Literal["offer"]
    price: float


class BargainAccept(_Bargain):
    """``{"kind": "accept"}``: accept the model's open offer."""

    kind: Literal["accept"]


class BargainReject(_Bargain):
    """``{"kind": "reject"}``: reject the model's open offer."""

    kind: Literal["reject"]


class BargainMessage(Strict):
    """``{"kind": "message", "text": ...}``: words only."""

    kind: Literal["message"]
    text: str = Field(max_length=MAX_MESSAGE_CHARS)


class BargainQuit(_Bargain):
    """``{"kind": "quit"}``: walk away."""

    kind: Literal["quit"]


_BARGAIN_MOVE = TypeAdapter(
    Annotated[
        BargainOffer | BargainAccept | BargainReject | BargainMessage | BargainQuit,
        Field(discriminator="kind"),
    ]
)


@register_board
class BargainingBoard:
    """Bargaining: the item and price range, the person's role and reservation value, the
    public log, and offer / message / accept / reject / quit controls."""

    game: ClassVar[str] = "bargaining"
    kind: ClassVar[str] = "bargaining"

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the item, the person's role and reservation value (never the model's), the
        round, both open offers and the public events (the model's Thought, searches and
        fallbacks stay private)."""
        state = cast("BargainingState", episode.state)
        view = state.view(seat)
        item = state.setup.item
        return {
            "role": view.role,
            "reservation": view.reservation,
            "item": {
                "title": item.title,
                "category": item.category,
                "description": item.description,
                "low": item.low,
                "high": item.high,
            },
            "round": view.round,
            "max_rounds": view.max_rounds,
            "listing": view.listing,
            "their_offer": view.their_standing,
            "your_offer": view.my_standing,
            "log": [_event(e, seat) for e in state.visible(seat) if e.kind != "wait"],
        }

    def outcome(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns whether a deal was made, its price, why the negotiation ended and both
        utilities (the model's reveals its value, which matters no more once the game is
        over)."""
        info = episode.rounds[-1].info
        accepted = info["accepted_by"]
        return {
            "deal": info["deal"],
            "price": info["price"],
            "end_reason": info["end_reason"],
            "accepted_by": None if accepted is None else who(accepted == seat),
            "your_utility": episode.rounds[-1].payoffs[seat],
            "model_utility": episode.rounds[-1].payoffs[1 - seat],
        }

    def decision(self, episode: Episode, obs: Observation, payload: Any) -> Decision:
        """Returns the person's turn as tool calls (checked by the game's own validator and
        protocol), e.g. ``send_message`` then ``make_offer``."""
        from stratagem.games.bargaining.tools import ParseError, Turn, check_turn, validate_call

        move = validate(_BARGAIN_MOVE, payload)
        calls: list[tuple[str, dict[str, Any]]] = []
        text = move.text if isinstance(move, BargainMessage) else move.message
        if text is not None:
            calls.append(("send_message", {"content": clean_text(text)}))
        if isinstance(move, BargainOffer):
            if not math.isfinite(move.price) or round(move.price, 2) <= 0:
                raise InputError("price: a price is a positive amount")
            calls.append(("make_offer", {"price": round(move.price, 2)}))
        elif isinstance(move, BargainAccept | BargainReject):
            calls.append(("respond_to_offer", {"response": isinstance(move, BargainAccept)}))
        elif isinstance(move, BargainQuit):
            calls.append(("quit_negotiation", {}))
        try:
            turn = Turn(check_turn(tuple(validate_call(name, args) for name, args in calls)))
        except ParseError as exc:
            raise InputError(str(exc)) from None
        problem = cast("BargainingState", episode.state).protocol_error(obs.seat, turn)
        if problem is not None:
            raise InputError(problem)
        return human(turn)


def _event(e: Any, seat: Seat) -> dict[str, Any]:
    """One public event as the page shows it (only the fields a person may see; texts cleaned
    like the person's)."""
    data: Mapping[str, Any] = e.data
    text, side = data.get("content"), data.get("side_offer")
    return {
        "t": e.time,
        "who": who(e.seat == seat),
        "kind": e.kind,
        "price": data.get("price"),
        "accept": data.get("accept"),
        "text": shown(text) if isinstance(text, str) else None,
        "side_offer": shown(side) if isinstance(side, str) else None,
        "duration": data.get("duration"),
    }
