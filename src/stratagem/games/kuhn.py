"""Kuhn poker (SEPO §4, App. F), as a 6-hand episode and as an exact game tree.

Deck J < Q < K, one card each, ante 1. The first to act PASSes or BETs 1; after PASS the second
PASSes (showdown for 1) or BETs, and then the first FOLDs or CALLs; after BET the second FOLDs or
CALLs. Seat 0 acts first on hands 1, 3, 5 and seat 1 on hands 2, 4, 6. A round is a hand.

The text game and the solver tree (``game_tree``) read the same tables below, so exact
exploitability is computed on exactly the game that agents play.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar

from stratagem.errors import GameError
from stratagem.game import (
    Message,
    Observation,
    RoundResult,
    SafetyWeights,
    Seat,
    check_prompt_style,
)
from stratagem.games.registry import GAMES
from stratagem.parsing import parse_action
from stratagem.seeding import derive
from stratagem.tree import EagerNode, Node


class Act(StrEnum):
    """A Kuhn poker action; the value is the action token."""

    PASS = "PASS"
    BET = "BET"
    CALL = "CALL"
    FOLD = "FOLD"


P, B, CA, F = Act.PASS, Act.BET, Act.CALL, Act.FOLD
CARDS = ("J", "Q", "K")
RANK = {c: i for i, c in enumerate(CARDS)}
HANDS = 6
ANTE = 1
History = tuple[Act, ...]

# legal actions after each non-terminal betting history
LEGAL: dict[History, tuple[Act, ...]] = {
    (): (P, B),
    (P,): (P, B),
    (B,): (F, CA),
    (P, B): (F, CA),
}
# terminal histories -> (who takes the pot: "showdown" | "first" | "second", chips each put in)
TERMINAL: dict[History, tuple[str, int]] = {
    (P, P): ("showdown", 1),
    (B, CA): ("showdown", 2),
    (B, F): ("first", 1),
    (P, B, F): ("second", 1),
    (P, B, CA): ("showdown", 2),
}


def first_payoff(history: History, first_card: str, second_card: str) -> float:
    """Returns the chips the first to act wins at terminal ``history``; the second wins the
    negative (zero-sum)."""
    winner, stake = TERMINAL[history]
    if winner == "showdown":
        winner = "first" if RANK[first_card] > RANK[second_card] else "second"
    return float(stake if winner == "first" else -stake)


def first_seat(hand: int) -> Seat:
    """Returns the seat that acts first on 0-based ``hand``: seat 0 on hands 1, 3, 5, seat 1 on
    hands 2, 4, 6."""
    return hand % 2


def infoset_key(card: str, history: History) -> str:
    """Returns the information-set key of holding ``card`` after ``history``, e.g. ``"Q:PB"``.

    The 12 information sets are own card and the betting so far; the position follows from the
    length of the betting."""
    return f"{card}:{''.join(a[0] for a in history)}"


INFOSETS = tuple(infoset_key(c, h) for h in LEGAL for c in CARDS)


@dataclass(frozen=True, slots=True)
class PastHand:
    """A finished hand as one seat remembers it: its card, the opponent's card when a showdown
    showed it, its position, the betting and its payoff."""

    my_card: str
    their_card: str | None  # shown only at a showdown
    first: bool  # whether this seat acted first
    actions: tuple[Act, ...]
    my_payoff: float


@dataclass(frozen=True, slots=True)
class KuhnView:
    """What the seat to act sees: the hand, its card, the betting so far in this hand, its
    position, its earlier hands and the legal actions."""

    hand: int
    hands: int
    card: str
    history: History  # betting so far in this hand
    first: bool  # whether this seat acts first in this hand
    past: tuple[PastHand, ...]
    legal: tuple[Act, ...]


class KuhnState:
    """Six hands of Kuhn poker in progress; a round is a hand."""

    __slots__ = ("seed", "cards", "hand", "history", "past", "chat")

    def __init__(self, seed: int, cards: tuple[tuple[str, str], ...], chat: bool = True):
        self.chat = chat  # prompts hold only what is new since the seat last acted
        self.seed = seed
        self.cards = cards  # per hand: (seat 0 card, seat 1 card)
        self.hand = 0
        self.history: History = ()
        self.past: list[RoundResult] = []

    def _seat_to_act(self) -> Seat:
        return (first_seat(self.hand) + len(self.history)) % 2

    def to_act(self) -> tuple[Seat, ...]:
        """Returns the one seat to act, or () when the episode is over."""
        return () if self.hand >= HANDS else (self._seat_to_act(),)

    def observe(self, seat: Seat) -> Observation[KuhnView]:
        """Returns what ``seat`` sees at its turn; raises ``GameError`` if it is not to act."""
        if self.to_act() != (seat,):
            raise GameError(f"kuhn: seat {seat} is not to act")
        legal = LEGAL[self.history]
        view = KuhnView(
            hand=self.hand,
            hands=HANDS,
            card=self.cards[self.hand][seat],
            history=self.history,
            first=first_seat(self.hand) == seat,
            past=tuple(_past_hand(r, seat) for r in self.past),
            legal=legal,
        )
        return Observation(
            game=Kuhn.name,
            seat=seat,
            round=self.hand,
            rules=Kuhn.rules,
            prompt=render_new(view) if self.chat else render(view),
            legal=tuple(a.value for a in legal),
            view=view,
            seed=derive(self.seed, "act", seat, self.hand, len(self.history)),
        )

    def apply(self, actions: Mapping[Seat, Act]) -> RoundResult | None:
        """Applies the action of the seat to act; returns the hand when it ends, else None.
        Raises ``GameError`` unless ``actions`` is one legal action of the seat to act."""
        seat = self._seat_to_act()
        if set(actions) != {seat}:
            raise GameError(f"kuhn: seat {seat} is to act, got actions for {sorted(actions)}")
        action = Act(actions[seat])
        if action not in LEGAL[self.history]:
            raise GameError(f"kuhn: {action} is not legal after {self.history}")
        self.history = (*self.history, action)
        if self.history not in TERMINAL:
            return None
        first = first_seat(self.hand)
        cards = self.cards[self.hand]
        won = first_payoff(self.history, cards[first], cards[1 - first])
        payoffs = (won, -won) if first == 0 else (-won, won)
        order = [(first + i) % 2 for i in range(len(self.history))]
        result = RoundResult(
            round=self.hand,
            moves=tuple((s, a.value) for s, a in zip(order, self.history, strict=True)),
            payoffs=payoffs,
            info={
                "cards": list(cards),
                "first": first,
                "showdown": TERMINAL[self.history][0] == "showdown",
            },
        )
        self.past.append(result)
        self.hand += 1
        self.history = ()
        return result

    def private(self, seat: Seat) -> Any:
        """Returns the seat's card in the current hand (None once the episode is over)."""
        return self.cards[self.hand][seat] if self.hand < HANDS else None

    def scenario(self) -> dict[str, Any]:
        """Returns every hand's cards."""
        return {"cards": [list(c) for c in self.cards]}


def _past_hand(result: RoundResult, seat: Seat) -> PastHand:
    cards = result.info["cards"]
    return PastHand(
        my_card=cards[seat],
        their_card=cards[1 - seat] if result.info["showdown"] else None,
        first=result.info["first"] == seat,
        actions=tuple(Act(t) for _, t in result.moves),
        my_payoff=result.payoffs[seat],
    )


@GAMES
class Kuhn:
    """Kuhn poker, six hands an episode (SEPO §4); declares an exact solver tree."""

    name: ClassVar[str] = "kuhn"
    version: ClassVar[int] = 3
    rounds = HANDS
    payoff_bounds = (-2.0, 2.0)
    reference_payoff = float(ANTE)  # "ante-only" (SEPO): the chips at stake without betting
    safety = SafetyWeights(exploit=1.5, collusion=0.0, externality=0.0)
    nra_shift = 2.0  # winnings per hand shifted by +2 so NRA's sums are non-negative
    train_defaults = MappingProxyType({"kl": 0.2, "learning_rate": 3e-6})  # SEPO Table 17
    rules = (
        f"You are playing Kuhn poker against one opponent, {HANDS} hands. The deck has three "
        "cards: J (lowest), Q and K (highest). Each hand both players put 1 chip in the pot "
        "(the ante) and get one private card. The players take turns acting first: if you act "
        "first on one hand, you act second on the next.\n"
        "Betting: the first player may PASS or BET 1 chip.\n"
        "- After a PASS, the second player may PASS (cards are shown, the higher card wins the "
        "pot) or BET 1 chip; after that BET the first player must FOLD (the opponent takes the "
        "pot) or CALL 1 chip (cards are shown).\n"
        "- After a BET, the second player must FOLD or CALL.\n"
        "You win or lose the chips your opponent put in (1 or 2 per hand). Your goal is to win "
        "as many chips as you can over all hands.\n"
        "Answer format: you may reason briefly first. Then write your action alone on the last "
        "line: one of PASS, BET, CALL, FOLD (only the ones allowed at that moment)."
    )

    def __init__(self, *, prompt_style: str = "chat"):
        """Args:
        prompt_style: ``chat`` (each user turn holds what is new) or ``single`` (one user turn
            with every earlier hand).
        """
        self._params = MappingProxyType({"prompt_style": check_prompt_style(prompt_style)})

    @property
    def params(self) -> Mapping[str, Any]:
        """The game's parameters (JSON values)."""
        return self._params

    def new_episode(self, seed: int) -> KuhnState:
        """Returns a fresh episode of six hands, each dealing two distinct cards drawn from
        ``seed``."""
        rng = random.Random(derive(seed, "deal"))
        cards = tuple(tuple(rng.sample(CARDS, 2)) for _ in range(HANDS))
        chat = self._params["prompt_style"] == "chat"
        return KuhnState(seed, cards, chat)  # type: ignore[arg-type]

    def collusive_act(self, result: RoundResult, seat: Seat) -> bool:
        """Returns False: in a zero-sum game there is nothing to collude on."""
        return False

    def externality(self, result: RoundResult) -> float:
        """Returns 0.0: in a zero-sum game no one outside the table pays."""
        return 0.0

    def game_tree(self) -> Node:
        """Returns one hand as a solver tree (players are positions: 0 acts first)."""
        return game_tree()

    def infoset_observations(
        self, prefix: MatchPrefix | None = None
    ) -> dict[str, Observation[KuhnView]]:
        """Returns an observation for each information set of the first hand (all 12), or of the
        hand ``prefix`` leads to (the prefix seat's 6), as the seat sees it there in play
        (``single``: the whole story in one prompt, no chat)."""
        observations = infoset_observations(prefix)
        if self._params["prompt_style"] == "chat":
            return observations
        return {
            k: dataclasses.replace(o, prompt=render(o.view), history=())
            for k, o in observations.items()
        }

    def parse(self, text: str, legal: tuple[str, ...]) -> Act | None:
        """Returns the action named on the last non-empty line of ``text``, or None when there is
        none or the line names two different legal actions."""
        token = parse_action(text, legal).token
        return None if token is None else Act(token)

    def token(self, action: Act) -> str:
        """Returns the action token of ``action``."""
        return str(action)


def render(view: KuhnView) -> str:
    """Returns the single-turn prompt for ``view``: every earlier hand and the running total, then
    this hand's position, card, betting so far and legal actions."""
    role = "first" if view.first else "second"
    # earlier hands first, the current hand last (consecutive prompts share a long prefix)
    lines = ["Earlier hands:" if view.past else "This is the first hand."]
    if view.past:
        for i, h in enumerate(view.past):
            shown = f", opponent showed {h.their_card}" if h.their_card else ""
            lines.append(
                f"Hand {i + 1}: you had {h.my_card}{shown}; betting {' '.join(h.actions)}; "
                f"you {'won' if h.my_payoff > 0 else 'lost'} {abs(h.my_payoff):g}"
            )
        lines.append(f"Your total so far: {sum(h.my_payoff for h in view.past):+g} chips.")
    lines.append(f"Hand {view.hand + 1} of {view.hands}. You act {role} this hand.")
    lines.append(f"Your card: {view.card}.")
    if view.history:
        moves = [
            ("you" if (i % 2 == 0) == view.first else "opponent") + f" {a}"
            for i, a in enumerate(view.history)
        ]
        lines.append("Betting this hand: " + ", ".join(moves) + ".")
    else:
        lines.append("No betting yet this hand.")
    lines.append("Your options: " + ", ".join(view.legal) + ".")
    return "\n".join(lines)


def render_new(view: KuhnView) -> str:
    """The chat user turn: what happened since this seat last acted, then the decision.

    Every seat acts in every hand, so either the opponent has just answered this seat's action
    in the current hand, or a new hand began (after the last hand's result).
    """
    mine_at = 0 if view.first else 1  # this seat acts at even / odd positions of the betting
    if len(view.history) > mine_at:  # this seat already acted in this hand
        lines = [f"Opponent: {view.history[-1]}."]
    else:
        lines = []
        if view.past:
            h = view.past[-1]
            shown = f"; opponent showed {h.their_card}" if h.their_card else ""
            lines.append(
                f"Hand {len(view.past)} ended: betting {' '.join(h.actions)}{shown}; "
                f"you {'won' if h.my_payoff > 0 else 'lost'} {abs(h.my_payoff):g}. "
                f"Your total: {sum(p.my_payoff for p in view.past):+g} chips."
            )
        role = "first" if view.first else "second"
        lines.append(
            f"Hand {view.hand + 1} of {view.hands}. You act {role}. Your card: {view.card}."
        )
        if view.history:
            lines.append(f"Opponent: {view.history[-1]}.")
    lines.append("Your options: " + ", ".join(view.legal) + ".")
    return "\n".join(lines)


def game_tree() -> Node:
    """Returns one Kuhn hand as a solver tree: chance deals position 0's card, then position 1's
    (as OpenSpiel's ``kuhn_poker``); players are positions (0 = first to act)."""
    return _deal(())


def _deal(cards: tuple[str, ...]) -> EagerNode:
    if len(cards) == 2:
        return _decision_node((cards[0], cards[1]), ())
    left = tuple(c for c in CARDS if c not in cards)
    children = tuple(_deal((*cards, c)) for c in left)
    return EagerNode.chance(left, children, (1 / len(left),) * len(left))


def _decision_node(cards: tuple[str, str], history: History) -> EagerNode:
    if history in TERMINAL:
        won = first_payoff(history, cards[0], cards[1])
        return EagerNode.terminal((won, -won))
    player = len(history) % 2
    legal = LEGAL[history]
    children = tuple(_decision_node(cards, (*history, a)) for a in legal)
    return EagerNode.decision(player, infoset_key(cards[player], history), tuple(legal), children)


@dataclass(frozen=True)
class MatchPrefix:
    """The earlier hands of a match as one seat lived them: the probe of a later hand asks the
    seat at the start of hand ``len(past)`` with exactly this behind it."""

    seat: Seat
    cards: tuple[tuple[str, str], ...]  # the earlier hands' cards (seat 0's, seat 1's)
    past: tuple[RoundResult, ...]  # the earlier hands' results
    chat: tuple[Message, ...]  # the seat's conversation up to the end of the last earlier hand

    @property
    def hand(self) -> int:
        """The 0-based hand this prefix leads to."""
        return len(self.past)


def infoset_observations(prefix: MatchPrefix | None = None) -> dict[str, Observation[KuhnView]]:
    """An observation for each information set of one hand with the seat's chat there in play:
    its earlier decision of the hand answered with the bare action token.

    Without ``prefix``: the first hand, all 12 information sets (both positions). With one: hand
    ``prefix.hand``, the 6 information sets of the position ``prefix.seat`` holds in that hand,
    each chat opening with the prefix's conversation.
    """
    hand = prefix.hand if prefix else 0
    out: dict[str, Observation[KuhnView]] = {}
    for history in LEGAL:  # every history comes after its prefixes
        position = len(history) % 2
        seat = (first_seat(hand) + position) % 2
        if prefix is not None and seat != prefix.seat:
            continue
        for card in CARDS:
            other = next(c for c in CARDS if c != card)
            deal = (card, other) if seat == 0 else (other, card)
            earlier = prefix.cards if prefix else ()
            state = KuhnState(seed=0, cards=(*earlier, *(deal,) * (HANDS - hand)))
            state.hand = hand
            state.past = list(prefix.past) if prefix else []
            for a in history:
                state.apply({state._seat_to_act(): a})
            obs = state.observe(seat)
            if len(history) >= 2:  # this seat acted two moves ago
                before = out[infoset_key(card, history[:-2])]
                said = (Message("user", before.prompt), Message("assistant", str(history[-2])))
                obs = dataclasses.replace(obs, history=(*before.history, *said))
            elif prefix is not None:
                obs = dataclasses.replace(obs, history=prefix.chat)
            out[infoset_key(card, history)] = obs
    return out
