"""What the person sees of each game and how their input becomes a decision (RELIABILITY I3, I4).

A *board* is the play page's view of one game, for the person's seat only: ``public`` returns the
JSON the page renders (never the model's private values, hidden reasoning or unrevealed moves),
``outcome`` the score screen once the episode is over, and ``decision`` turns the person's
request body into a ``Decision`` — or raises ``InputError`` (HTTP 422) with the episode untouched.

Input is checked in three layers: a strict pydantic model (exact keys, JSON integers for counts,
numbers for prices, bounded strings: ``10**100``, ``1.5``, ``"2"``, ``true``, prose and lone
surrogates are refused), text cleaning (Unicode NFKC, control and bidi characters removed, at
most ``MAX_MESSAGE_CHARS``), then the game's own rules asked *before* the turn is submitted
(``DondState.fault``, ``BargainingState.protocol_error``), so the person never spends one of the
game's corrections: a refused turn changes nothing.

Boards are looked up by game id (``board_for``): the page is the one place that knows how each game
looks to a person, as a strategy module is for how each game is played.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.errors import UnknownNameError
from stratagem.game import Observation, Seat

MAX_MESSAGE_CHARS = 1000
_CONTROL = re.compile("[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f]")


class InputError(ValueError):
    """The person's request is refused (HTTP 422); ``str(error)`` is the one line they see."""


class Board(Protocol):
    """The play page's view of one game, for the person's seat."""

    game: ClassVar[str]

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


def clean_text(text: str, what: str = "message") -> str:
    """Returns ``text`` NFKC-normalised, with control and bidi characters removed (line breaks
    become spaces); raises ``InputError`` when it is empty or longer than ``MAX_MESSAGE_CHARS``.

    Lone surrogates never get here: the strict input models refuse them.
    """
    if len(text) > MAX_MESSAGE_CHARS:
        raise InputError(f"a {what} holds at most {MAX_MESSAGE_CHARS} characters")
    text = unicodedata.normalize("NFKC", text)
    text = _CONTROL.sub(" ", text).strip()
    text = re.sub(r" {2,}", " ", text)
    if not text:
        raise InputError(f"the {what} is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise InputError(f"a {what} holds at most {MAX_MESSAGE_CHARS} characters")
    return text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _validate(adapter: TypeAdapter, payload: Any) -> Any:
    """Returns ``payload`` validated by ``adapter``, or raises ``InputError`` naming the first
    problem (its location and pydantic's message; the input itself is never echoed)."""
    try:
        return adapter.validate_python(payload)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"] if not isinstance(x, int)) or "body"
        raise InputError(f"{where}: {err['msg']}") from None


def _who(mine: bool) -> str:
    return "you" if mine else "model"


def _human(action: Any) -> Decision:
    return Decision(action, info={"human": True})


# ---- Deal or No Deal ----


class DondMessage(_Strict):
    """``{"kind": "message", "text": ...}``: a message to the model."""

    kind: Literal["message"]
    text: str = Field(max_length=MAX_MESSAGE_CHARS)


class DondProposal(_Strict):
    """``{"kind": "propose", "books": x, "hats": y, "balls": z}``: the counts the person keeps."""

    kind: Literal["propose"]
    books: int = Field(ge=0, le=100)
    hats: int = Field(ge=0, le=100)
    balls: int = Field(ge=0, le=100)


_DOND_MOVE = TypeAdapter(Annotated[DondMessage | DondProposal, Field(discriminator="kind")])


class DondBoard:
    """Deal or No Deal: the items, the person's own values, the dialogue, a proposal form."""

    game: ClassVar[str] = "dond"

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the counts, the person's values (never the model's), the objective, the
        dialogue as the person sees it (the model's proposal without its counts) and which kind
        of turn is open."""
        from stratagem.games.dond import ITEMS, objective_text

        view = episode.state.view(seat)
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
                {"who": _who(line.mine), "kind": str(line.kind), "text": line.text}
                for line in view.dialogue
            ],
            "can_message": not view.must_propose,
            "can_propose": view.discussed,
            "model_proposed": view.other_proposed,
        }

    def outcome(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns how the dialogue ended, both proposals (revealed now), the person's points
        and objective score; never the model's values or points."""
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
            "aborted_by": None if aborted is None else _who(aborted == seat),
        }

    def decision(self, episode: Episode, obs: Observation, payload: Any) -> Decision:
        """Returns a ``[message]`` or ``[propose]`` turn; refuses counts above the pool and any
        turn the rules refuse now (a proposal before any message, a message after the model
        proposed or past the turn limit)."""
        from stratagem.games.dond import ITEMS, Propose, Say

        move = _validate(_DOND_MOVE, payload)
        state = episode.state
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
        return _human(turn)


_DOND_FAULTS = MappingProxyType(
    {
        "proposal_before_message": "send a message before anyone proposes",
        "message_after_proposal": "the model has proposed: messages are closed, propose now",
        "turn_limit": "the turn limit is reached: messages are closed, submit your proposal",
    }
)


# ---- bargaining ----


class _Bargain(_Strict):
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


class BargainMessage(_Strict):
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


class BargainingBoard:
    """Bargaining: the item and price range, the person's role and reservation value, the
    public log, and offer / message / accept / reject / quit controls."""

    game: ClassVar[str] = "bargaining"

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the item, the person's role and reservation value (never the model's), the
        round, both open offers and the public events (the model's Thought, searches and
        fallbacks stay private)."""
        state = episode.state
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
        """Returns whether a deal was made, its price, why the negotiation ended and the
        person's utility (not the model's: with the price it would reveal its value)."""
        info = episode.rounds[-1].info
        accepted = info["accepted_by"]
        return {
            "deal": info["deal"],
            "price": info["price"],
            "end_reason": info["end_reason"],
            "accepted_by": None if accepted is None else _who(accepted == seat),
            "your_utility": episode.rounds[-1].payoffs[seat],
        }

    def decision(self, episode: Episode, obs: Observation, payload: Any) -> Decision:
        """Returns the person's turn as tool calls (checked by the game's own validator and
        protocol), e.g. ``send_message`` then ``make_offer``."""
        from stratagem.games.bargaining.tools import ParseError, Turn, check_turn, validate_call

        move = _validate(_BARGAIN_MOVE, payload)
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
        problem = episode.state.protocol_error(obs.seat, turn)
        if problem is not None:
            raise InputError(problem)
        return _human(turn)


def _event(e: Any, seat: Seat) -> dict[str, Any]:
    """One public event as the page shows it (only the fields a person may see)."""
    data: Mapping[str, Any] = e.data
    return {
        "t": e.time,
        "who": _who(e.seat == seat),
        "kind": e.kind,
        "price": data.get("price"),
        "accept": data.get("accept"),
        "text": data.get("content"),
        "side_offer": data.get("side_offer"),
        "duration": data.get("duration"),
    }


# ---- games with a fixed choice of actions (IPD, Kuhn poker) ----


class Choice(_Strict):
    """``{"action": TOKEN}``: one of the legal action tokens."""

    action: str = Field(max_length=40)


_CHOICE = TypeAdapter(Choice)


class ChoiceBoard:
    """A game whose every turn is a choice among ``obs.legal``: one button per token."""

    game: ClassVar[str] = ""

    def decision(self, episode: Episode, obs: Observation, payload: Any) -> Decision:
        """Returns the chosen legal action; refuses any other token."""
        move = _validate(_CHOICE, payload)
        if move.action not in obs.legal:
            raise InputError(f"action: choose one of {', '.join(obs.legal)}")
        return _human(episode.game.parse(move.action, obs.legal))

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the rounds played so far, with each seat's moves and the person's points."""
        raise NotImplementedError

    def outcome(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns both totals (these games have no private values to protect at the end)."""
        totals = (
            sum(r.payoffs[0] for r in episode.rounds),
            sum(r.payoffs[1] for r in episode.rounds),
        )
        return {"your_total": totals[seat], "model_total": totals[1 - seat]}


class IPDBoard(ChoiceBoard):
    """The iterated Prisoner's Dilemma: the payoff table, the rounds so far, two buttons."""

    game: ClassVar[str] = "ipd"

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the payoff table (yours first), the finished rounds (the model's move in the
        current round stays hidden until both moved) and the running totals."""
        from stratagem.games.ipd import PAYOFFS

        rounds = [
            {
                "you": r.action(seat),
                "model": r.action(1 - seat),
                "your_points": r.payoffs[seat],
                "model_points": r.payoffs[1 - seat],
            }
            for r in episode.rounds
        ]
        table = [
            {
                "you": str(pair[seat]),
                "model": str(pair[1 - seat]),
                "your_points": pts[seat],
                "model_points": pts[1 - seat],
            }
            for pair, pts in PAYOFFS.items()
        ]
        return {
            "round": len(episode.rounds),
            "rounds_total": episode.game.rounds,
            "payoffs": table,
            "rounds": rounds,
            "your_total": sum(r["your_points"] for r in rounds),
            "model_total": sum(r["model_points"] for r in rounds),
        }


class KuhnBoard(ChoiceBoard):
    """Kuhn poker: the person's card, the betting of this hand, past hands, the legal actions."""

    game: ClassVar[str] = "kuhn"

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the hand, the person's card (the model's only after a showdown), who acts
        first, the betting so far and the finished hands with the person's chips."""
        from stratagem.games.kuhn import HANDS, first_seat

        state = episode.state
        hand = state.hand
        past = [
            {
                "card": r.info["cards"][seat],
                "model_card": r.info["cards"][1 - seat] if r.info["showdown"] else None,
                "betting": [{"who": _who(s == seat), "action": a} for s, a in r.moves],
                "your_chips": r.payoffs[seat],
            }
            for r in episode.rounds
        ]
        live = hand < HANDS
        first = first_seat(hand) if live else None
        order = [first, 1 - first] if first is not None else []
        betting = [
            {"who": _who(order[i % 2] == seat), "action": str(a)}
            for i, a in enumerate(state.history)
        ]
        return {
            "hand": hand,
            "hands": HANDS,
            "card": state.cards[hand][seat] if live else None,
            "first": live and first == seat,
            "betting": betting,
            "past": past,
            "your_total": sum(p["your_chips"] for p in past),
        }


BOARDS: Mapping[str, Board] = MappingProxyType(
    {b.game: b for b in (DondBoard(), BargainingBoard(), IPDBoard(), KuhnBoard())}
)


def board_for(game: str) -> Board:
    """Returns the board of ``game``; raises ``UnknownNameError`` for a game the page cannot
    show."""
    if game not in BOARDS:
        raise UnknownNameError("game for the play page", game, BOARDS)
    return BOARDS[game]
