"""Boards of games whose every turn is a choice among ``obs.legal`` and that have no private
values to protect at the end: the iterated Prisoner's Dilemma (with its payoff table) and Kuhn
poker (the person's card and the betting). One button per legal token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from pydantic import Field, TypeAdapter

from stratagem.agent import Decision
from stratagem.episode import Episode
from stratagem.game import Observation, Seat
from stratagem.web.boards.base import InputError, Strict, human, register_board, validate, who

if TYPE_CHECKING:
    from stratagem.games.ipd import IPD
    from stratagem.games.kuhn import KuhnState


class Choice(Strict):
    """``{"action": TOKEN}``: one of the legal action tokens."""

    action: str = Field(max_length=40)


_CHOICE = TypeAdapter(Choice)


class ChoiceBoard:
    """A game whose every turn is a choice among ``obs.legal``: one button per token."""

    game: ClassVar[str] = ""
    kind: ClassVar[str] = ""

    def decision(self, episode: Episode, obs: Observation, payload: Any) -> Decision:
        """Returns the chosen legal action; refuses any other token."""
        move = validate(_CHOICE, payload)
        if move.action not in obs.legal:
            raise InputError(f"action: choose one of {', '.join(obs.legal)}")
        return human(episode.game.parse(move.action, obs.legal))

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


@register_board
class IPDBoard(ChoiceBoard):
    """The iterated Prisoner's Dilemma: the payoff table, the rounds so far, two buttons."""

    game: ClassVar[str] = "ipd"
    kind: ClassVar[str] = "ipd"

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
            "rounds_total": cast("IPD", episode.game).rounds,
            "payoffs": table,
            "rounds": rounds,
            "your_total": sum(r["your_points"] for r in rounds),
            "model_total": sum(r["model_points"] for r in rounds),
        }


@register_board
class KuhnBoard(ChoiceBoard):
    """Kuhn poker: the person's card, the betting of this hand, past hands, the legal actions."""

    game: ClassVar[str] = "kuhn"
    kind: ClassVar[str] = "kuhn"

    def public(self, episode: Episode, seat: Seat) -> dict[str, Any]:
        """Returns the hand, the person's card (the model's only after a showdown), who acts
        first, the betting so far and the finished hands with the person's chips."""
        from stratagem.games.kuhn import HANDS, first_seat

        state = cast("KuhnState", episode.state)
        hand = state.hand
        past = [
            {
                "card": r.info["cards"][seat],
                "model_card": r.info["cards"][1 - seat] if r.info["showdown"] else None,
                "betting": [{"who": who(s == seat), "action": a} for s, a in r.moves],
                "your_chips": r.payoffs[seat],
            }
            for r in episode.rounds
        ]
        live = hand < HANDS
        first = first_seat(hand) if live else None
        order = [first, 1 - first] if first is not None else []
        betting = [
            {"who": who(order[i % 2] == seat), "action": str(a)}
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
