"""Templated reasoning for SFT demonstrations (SPEC §5): a short sentence that explains the
demonstrator's choice from its strategy, the action and the history — never LLM-written.

Each entry returns a few phrasings; the generator picks one with the episode's seeded rng.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Reason = Callable[[Any, str], list[str]]


def _ipd(strategy: str, v, action: str) -> list[str]:
    last = v.theirs[-1] if v.theirs else None
    if strategy == "AlwaysDefect":
        return [
            "Defecting pays more whatever they do, so I defect.",
            "I defect: it is the safer payoff this round.",
        ]
    if strategy == "AlwaysCooperate":
        return ["I cooperate to keep trust between us.", "Cooperation is my policy: I cooperate."]
    if strategy == "Random":
        return ["I vary my play this round.", "I pick my move without a fixed rule."]
    if last is None:
        return ["First round: I open by cooperating.", "No history yet, so I start friendly."]
    if strategy == "GrimTrigger":
        if "DEFECT" in v.theirs:
            return [
                "They defected before; I will not trust them again.",
                "Once betrayed, I defect for the rest of the game.",
            ]
        return ["They have always cooperated, so I keep cooperating."]
    if last == "DEFECT" and action == "COOPERATE":
        return [
            "They defected, but I forgive them this time.",
            "I give them another chance and cooperate.",
        ]
    if last == "DEFECT":
        return [
            "They defected last round, so I defect back.",
            "They broke trust last round; I answer in kind.",
        ]
    return ["They cooperated last round, so I cooperate.", "They cooperated; I return the favour."]


def _auction(strategy: str, v, action: str) -> list[str]:
    if strategy == "Random":
        return ["I vary my bid this round.", "I try a different bid this time."]
    if strategy == "AggressiveValue" and v.lost():
        return ["I lost last round, so I bid HIGH now.", "After losing, I push my bid up."]
    if strategy == "Adaptive":
        if not v.theirs:
            return ["No bids seen yet, so I start LOW.", "I open cautiously with a low bid."]
        if action == "LOW":
            return [f"Outbidding their {v.theirs[-1]} would not pay, so I bid LOW."]
        return [f"They bid {v.theirs[-1]} last time; one step above still pays."]
    if v.value == 2:
        return [
            "My value is 2, so I bid MEDIUM to match it.",
            "The item is worth 2 to me; MEDIUM is my honest bid.",
        ]
    return [
        "My value is 4: HIGH still leaves a profit.",
        "The item is worth 4 to me, so I bid HIGH.",
    ]


def _negotiation(strategy: str, v, action: str) -> list[str]:
    d = action
    if strategy == "FairSplit":
        return ["An even split of 5 is fair and safe.", "I ask for half: 5."]
    if strategy == "Balanced":
        return ["I ask for 6: a little more than half.", "6 is a modest edge over an even split."]
    if strategy == "Concede":
        if v.round == 0:
            return ["I open high with 8.", "I start ambitious and will come down."]
        return [f"I lower my demand to {d} this round.", f"I concede a point and ask for {d}."]
    if strategy == "TFTNeg":
        if not v.theirs:
            return ["I start with a fair 5."]
        return [f"They asked {v.theirs[-1]}, so I ask for what remains: {d}."]
    return [f"I try a demand of {d}.", "I pick a demand without a fixed rule."]


def _multi_issue(strategy: str, v, action: str) -> list[str]:
    if strategy == "Proportional":
        return ["I ask for more of what I value most.", "My demand follows my own values."]
    if strategy == "Conservative":
        return [
            "I claim half of the items I value highly, nothing else.",
            "I keep my demand small to avoid a breakdown.",
        ]
    if strategy == "Defensive":
        return [
            "I take half of each item I value and skip the rest.",
            "I hold a fair share of what matters to me.",
        ]
    if strategy == "Adaptive":
        if not v.mine:
            return ["I start with a fair half of everything."]
        if v.mine[-1] and tuple(action.strip("[]").replace(" ", "").split(",")) != tuple(
            str(x) for x in v.mine[-1]
        ):
            return ["Last round's result tells me to adjust my demand by one unit."]
        return ["Last round worked, so I repeat my demand."]
    return ["I try a different split this round."]


def _kuhn(strategy: str, v, action: str) -> list[str]:
    card = v.card
    if strategy == "RandomLegal":
        return ["I pick a legal action at random.", f"With the {card} I mix things up."]
    strength = {"K": "the best card", "Q": "a middling card", "J": "the weakest card"}[card]
    if action == "BET":
        if card == "J":
            return ["I bluff with the J.", "A bet with the J can push them to fold."]
        return [f"I hold {strength}, so I bet.", f"My {card} is worth betting."]
    if action == "CALL":
        return [f"My {card} is strong enough to call.", f"I call with {strength}."]
    if action == "FOLD":
        return [f"My {card} is too weak to call; I fold.", f"With {strength} I fold to the bet."]
    return [f"With {strength} I pass.", f"I check with the {card}."]


REASONS: dict[str, Callable[[str, Any, str], list[str]]] = {
    "ipd": _ipd,
    "auction": _auction,
    "negotiation": _negotiation,
    "multi_issue": _multi_issue,
    "kuhn": _kuhn,
}


def reasons(game: str, strategy: str, view: Any, action: str) -> list[str]:
    """Candidate one-line explanations of ``action`` by ``strategy`` at ``view``."""
    return REASONS[game](strategy, view, action)
