"""Deal or No Deal prompts: the system turn (pool, own values, objective, rules, answer format)
and the user turn (what is new, or the whole dialogue in the ``single`` style). The other seat's
messages reach a seat as quoted text (RELIABILITY G5).
"""

from __future__ import annotations

from stratagem.games.corrections import correction_text
from stratagem.games.dond.contexts import TOTAL_VALUE, pool_text
from stratagem.games.dond.turns import MAX_FAULTS, Kind
from stratagem.games.dond.view import DondView, Line
from stratagem.games.quoting import quote


def objective_text(lam: float) -> str:
    """Returns how a seat's score is computed under λ, in words."""
    own = "the value, to you, of the items you receive"
    theirs = "the value, to the other player, of the items it receives"
    if lam == 0:
        return f"Your score is {own}. Aim for the highest score you can get."
    if lam == 1:
        return (
            f"Your score is {own} plus {theirs}. The other player's score is the same sum, so "
            "you are on the same side: aim for the highest total."
        )
    if lam == -1:
        return (
            f"Your score is {own} minus {theirs}. Whatever the other player gains, you lose: "
            "aim to come out ahead."
        )
    sign = "plus" if lam > 0 else "minus"
    return f"Your score is {own} {sign} {abs(lam):g} times {theirs}. Aim for the highest score."


def system_prompt(view: DondView) -> str:
    """Returns the seat's system turn: the game, the pool, its own values (only), its objective,
    the turn rules and the answer format."""
    b, h, c = view.values
    return (
        "You are negotiating with another player over how to split a shared pool of items: "
        f"{pool_text(view.counts)}. Each of you privately values the items; you do not know the "
        "other player's values and it does not know yours.\n"
        f"Your values: a book is worth {b}, a hat {h} and a ball {c} points to you, so the "
        f"whole pool is worth {TOTAL_VALUE} points to you.\n"
        f"{objective_text(view.lam)}\n"
        "How the game goes: you take turns. On your turn you either send the other player a "
        "message or submit a proposal: the items you keep. A proposal stays hidden from the "
        "other player. As soon as one of you has proposed, the other must propose too, and the "
        "game ends. If the two proposals add up exactly to the whole pool, each of you receives "
        "the items you proposed; otherwise nobody receives anything. Discuss first: nobody may "
        f"propose before a message was sent, and after {view.max_turns} turns messages close "
        "and both of you must propose.\n"
        "Answer format: your whole answer is either\n"
        "[message] your message to the other player\n"
        "or\n"
        "[propose] (x books, y hats, z balls)\n"
        "where x, y and z are the numbers of books, hats and balls you keep, in that order, "
        "as whole numbers. Write [message] or [propose] once, at the start. An answer that "
        f"breaks these rules is sent back for correction; {MAX_FAULTS} faulty answers in a row "
        "end the game with 0 points for both."
    )


def _status(view: DondView) -> str:
    if view.other_proposed:
        return "Now submit your own proposal: [propose] (x books, y hats, z balls)."
    if view.turn >= view.max_turns:
        return (
            f"The limit of {view.max_turns} turns is reached: submit your proposal now with "
            "[propose] (x books, y hats, z balls)."
        )
    return (
        f"Turn {view.turn + 1} of {view.max_turns}. Your answer: [message] ... or "
        "[propose] (x books, y hats, z balls)."
    )


def _said(line: Line) -> str:
    if line.kind is Kind.MESSAGE:
        return f"{'You' if line.mine else 'The other player'} wrote: {quote(line.text)}"
    if line.mine:
        return f"You proposed to keep {line.text}."
    return "The other player submitted its proposal (hidden from you until the end)."


def new_prompt(view: DondView) -> str:
    """Returns the chat user turn: the other seat's turns since this seat spoke, then what to
    do now."""
    lines = [_said(line) for line in view.new]
    if not view.dialogue:
        lines.append("The negotiation starts and you speak first.")
    return "\n".join([*lines, _status(view)])


def full_prompt(view: DondView) -> str:
    """Returns the single-turn prompt: the whole dialogue so far, what to do now and, when
    answering again, the correction."""
    lines = ["The dialogue so far:" if view.dialogue else "The negotiation starts."]
    lines += [_said(line) for line in view.dialogue]
    if not view.dialogue:
        lines.append("You speak first.")
    lines.append(_status(view))
    if view.correction is not None:
        lines.append(correction_text(view.correction, view.attempt))
    return "\n".join(lines)
