"""Leduc's words: the rules (system turn), the chat turn of each decision and the single prompt.

Cards are shown as they are dealt, rank then suit (``Qh``); the rules say suits never matter. A
CALL with nothing to call is shown as a check, both in the betting and in the options.
"""

from __future__ import annotations

from stratagem.games.leduc.rules import ANTE, RAISE_SIZE, Act
from stratagem.games.leduc.view import LeducView, PastHand

HANDS = 4


def rules_text(hands: int = HANDS) -> str:
    """The system turn: the deck, the two betting rounds, the showdown and the answer format."""
    return (
        f"You are playing Leduc poker against one opponent, {hands} hands. The deck has six "
        "cards: a jack (J), a queen (Q) and a king (K) in each of two suits, spades (s) and "
        "hearts (h). A card is written rank then suit: Qh is the queen of hearts. Suits never "
        "matter, only ranks.\n"
        f"Every hand starts from the full deck: each player puts {ANTE} chip in the pot (the "
        "ante) and receives one private card. Who acts first alternates from hand to hand, and "
        "the player who acts first in a hand does so in both of its betting rounds.\n"
        "A hand has two betting rounds. Between them one public card is turned face up; it "
        f"belongs to both players. A raise is {RAISE_SIZE[0]} chips in round 1 and "
        f"{RAISE_SIZE[1]} chips in round 2, and a round allows at most two raises.\n"
        "Your actions:\n"
        "- CALL puts in the chips needed to match the opponent. When there is nothing to match "
        "it costs nothing: it is a check, and you still answer CALL.\n"
        "- RAISE matches the opponent and then adds the round's raise.\n"
        "- FOLD gives the pot to the opponent and ends the hand; it is offered only when you "
        "face a raise.\n"
        "A round is over when a raise is called or when both players have checked. If nobody "
        "folds, the cards are shown after round 2: a private card with the same rank as the "
        "public card (a pair) wins; without a pair the higher rank wins, K over Q over J; equal "
        "ranks share the pot.\n"
        "You win the chips the opponent put in, or lose the chips you put in (at most 13 in a "
        "hand). Your goal is to win as many chips as you can over all hands.\n"
        "Answer format: you may reason briefly first. Then write your action alone on the last "
        "line: one of FOLD, CALL, RAISE (only the ones allowed at that moment)."
    )


def move_text(sequence: str, i: int) -> str:
    """Letter ``i`` of a round's betting ``sequence`` as the prompts show it: a CALL with nothing
    to call reads ``CALL (check)``."""
    letter = sequence[i]
    if letter == "C" and (i == 0 or sequence[i - 1] != "R"):
        return "CALL (check)"
    return {"F": "FOLD", "C": "CALL", "R": "RAISE"}[letter]


def betting_text(betting: tuple[str, ...], first: bool) -> str:
    """Every round's betting from one seat's side: ``round 1: you RAISE, opponent CALL; ...``."""
    rounds = []
    for r, sequence in enumerate(betting):
        moves = [
            ("you " if (i % 2 == 0) == first else "opponent ") + move_text(sequence, i)
            for i in range(len(sequence))
        ]
        rounds.append(f"round {r + 1}: " + (", ".join(moves) if moves else "no betting"))
    return "; ".join(rounds)


def chips(n: float) -> str:
    """``1 chip``, ``3 chips``."""
    return f"{n:g} chip" + ("" if n == 1 else "s")


def _result(hand: PastHand) -> str:
    if hand.folded is True:
        how = "you folded"
    elif hand.folded is False:
        how = "the opponent folded"
    else:
        how = f"showdown, the opponent showed {hand.their_card}"
    if hand.my_payoff > 0:
        outcome = f"you won {chips(hand.my_payoff)}"
    elif hand.my_payoff < 0:
        outcome = f"you lost {chips(-hand.my_payoff)}"
    else:
        outcome = "the pot was shared, no chips won or lost"
    return f"{how}; {outcome}"


def _public(hand: PastHand) -> str:
    return f"public card {hand.public}; " if hand.public else ""


def _options(view: LeducView) -> str:
    mine, theirs = view.put_in
    to_call = theirs - mine
    words = {
        Act.FOLD: "FOLD (give up the pot)",
        Act.CALL: f"CALL (put in {to_call} to match)"
        if to_call
        else "CALL (check: nothing to call)",
        Act.RAISE: f"RAISE (put in {to_call + view.raise_size})",
    }
    return "Your options: " + ", ".join(words[a] for a in view.legal) + "."


def _pot(view: LeducView) -> str:
    mine, theirs = view.put_in
    return f"Chips in the pot: you {mine}, opponent {theirs}."


def _role(view: LeducView) -> str:
    return "first" if view.first else "second"


def render(view: LeducView) -> str:
    """The single-turn prompt: every earlier hand and the running total, then this hand's card,
    public card, betting so far, chips in the pot and legal actions."""
    lines = ["Earlier hands:" if view.past else "This is the first hand."]
    for i, h in enumerate(view.past):
        role = "first" if h.first else "second"
        lines.append(
            f"Hand {i + 1}: you had {h.my_card} and acted {role}; {_public(h)}"
            f"{betting_text(h.betting, h.first)}; {_result(h)}."
        )
    if view.past:
        lines.append(f"Your total so far: {sum(h.my_payoff for h in view.past):+g} chips.")
    lines.append(f"Hand {view.hand + 1} of {view.hands}. You act {_role(view)} in both rounds.")
    lines.append(f"Your card: {view.card}.")
    if view.public:
        lines.append(f"Public card: {view.public}.")
    betting = betting_text(view.betting, view.first)
    lines.append(f"Betting so far: {betting}. Raises are {view.raise_size} chips this round.")
    lines += [_pot(view), _options(view)]
    return "\n".join(lines)


def render_new(view: LeducView) -> str:
    """The chat user turn: what happened since this seat last acted, then the decision.

    Since its last action: the opponent's actions and, where the first round closed, the public
    card. At the seat's first decision of a hand: how the previous hand ended, then the new hand
    (position, card) and the opponent's opening action if it acted first.
    """
    events: list[tuple[bool, str]] = []  # (this seat's own action, the line that tells it)
    for r, sequence in enumerate(view.betting):
        if r == 1:
            events.append(
                (
                    False,
                    f"Round 1 is over. Public card: {view.public}. Round 2: raises are "
                    f"{RAISE_SIZE[1]} chips.",
                )  # fmt: skip
            )
        for i in range(len(sequence)):
            mine = (i % 2 == 0) == view.first
            events.append((mine, f"Opponent: {move_text(sequence, i)}."))
    own = [k for k, (mine, _) in enumerate(events) if mine]
    lines: list[str] = []
    if not own:  # the seat's first decision of this hand
        if view.past:
            h = view.past[-1]
            total = sum(p.my_payoff for p in view.past)
            lines.append(
                f"Hand {len(view.past)} ended: {_public(h)}{betting_text(h.betting, h.first)}; "
                f"{_result(h)}. Your total: {total:+g} chips."
            )
        lines.append(
            f"Hand {view.hand + 1} of {view.hands}. You act {_role(view)} in both rounds. "
            f"Your card: {view.card}. Round 1: raises are {RAISE_SIZE[0]} chips."
        )
    lines += [text for _, text in events[own[-1] + 1 if own else 0 :]]
    lines += [_pot(view), _options(view)]
    return "\n".join(lines)
