"""Debate (seed 003 §3.2): argue for or against a motion; an LLM judge names the winner.

Public: the motion. Private to each seat: its side (seat 0's side is drawn per scenario, seat 1
argues the other). Action: the mode of persuasion (``logos``, ``ethos``, ``pathos``, or ``any``).
Messages are free text. No exact payoff exists: a judge reads the debate and names the winner,
who earns +1 and the loser −1. The judge is asked twice, with the sides named in both orders,
and the payoffs are the mean (0 each when the orders disagree), so a judge that favours the
side named first favours neither seat (the embedded model's judge named seat 0 almost always).
A verdict that names neither debater is not a payoff: callers record it as a failure (or, when
enabled, fall back to the judge's constrained choice between the two names, recorded as a
fallback).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from stratagem.games.dialogue.base import (
    ANY,
    Chat,
    Domain,
    Scenario,
    Verdict,
    few_shot,
    pick_names,
    register,
)
from stratagem.games.quoting import quote
from stratagem.seeding import rng

MOTIONS = (
    "Homework should be banned in primary schools",
    "Cities should make public transport free",
    "Remote work is better than office work",
    "Zoos should be closed",
    "Social media does more harm than good",
    "Voting should be compulsory",
    "Space exploration is worth its cost",
    "Video games are a form of art",
    "Cash should be replaced by digital money",
    "Every adult should learn to cook",
    "Tourism harms the places people visit",
    "School uniforms should be abolished",
    "Cats make better pets than dogs",
    "The four-day work week should be the norm",
    "Fast food should carry a health tax",
    "Museums should be free to enter",
    "Printed books will outlast e-books",
    "Children should learn to code before ten",
    "Winter is the best season of the year",
    "Cars should be banned from city centres",
)
STYLES = {
    "logos": "appeals to reason: facts, evidence and logical argument",
    "ethos": "appeals to the speaker's authority, credibility or character",
    "pathos": "appeals to emotions: sympathy, fear, anger or hope",
}
_WINNER = re.compile(r"WINNER\s*:\s*\**\s*([A-Za-z]+)", re.IGNORECASE)


@dataclass(frozen=True)
class Side:
    """One seat's private information: whether it argues for the motion."""

    in_favour: bool

    @property
    def word(self) -> str:
        """``for`` or ``against``."""
        return "for" if self.in_favour else "against"


JUDGE_SYSTEM = "You judge debates fairly."
# worked examples for the judge (our own): the better case wins whichever side and position it
# has, once the side named first and once the side named second
EXAMPLE = Scenario(
    "debate",
    -1,
    ("Pat", "Kim"),
    (Side(True), Side(False)),
    "",
    "Libraries should stay open all night",
)
_OPENING = "Hello Kim. I will argue for the motion, and I look forward to hearing your case."
JUDGE_EXAMPLES: tuple[tuple[tuple[str, ...], tuple[int, int], str], ...] = (
    (
        (
            _OPENING,
            "Night opening costs staff and heating, and a survey in our town found that 3% of "
            "people would use it; the same money would buy more books for everyone.",
            "Libraries are great and everyone knows it.",
        ),
        (0, 1),
        "Kim gave costs and evidence; Pat only repeated the claim.\nWINNER: Kim",
    ),
    (
        (
            _OPENING,
            "Nobody reads at night, obviously.",
            "Shift workers and students have no other quiet place to study after ten, and "
            "cities that tried it report steady use.",
        ),
        (0, 1),
        "Pat named who benefits and what happened elsewhere; Kim only asserted.\nWINNER: Pat",
    ),
)


@register
class Debate(Domain):
    """Debate: action = the mode of persuasion; payoff from an LLM judge (±1)."""

    name = "debate"
    version = 2  # 2: the judge is asked in both orders of the sides, after worked examples
    default_instructions = ("logos", "ethos", "pathos", ANY)
    definitions = STYLES
    payoff_range = (-1.0, 1.0)
    structured = False

    def scenario(self, seed: int) -> Scenario:
        """A motion, seat 0's side, and seat 0's opening statement."""
        r = rng(seed, "debate")
        names = pick_names(r)
        motion = r.choice(MOTIONS)
        first = Side(r.random() < 0.5)
        opening = (
            f"Hello {names[1]}. I will argue {first.word} the motion {quote(motion)}, and I look "
            f"forward to hearing your case."
        )
        return Scenario(self.name, seed, names, (first, Side(not first.in_favour)), opening, motion)

    def situation(self, scenario: Scenario, seat: int) -> str:
        """The motion and the seat's side."""
        side: Side = scenario.private[seat]
        return (
            f"You are debating {scenario.names[1 - seat]} on the motion {quote(scenario.topic)}. "
            f"You argue {side.word} it. A judge will decide who argued better."
        )

    def instruction_text(self, instruction: str, scenario: Scenario, seat: int) -> str:
        """Argue in the style ``instruction`` (with its meaning when known)."""
        if instruction == ANY:
            return "argue in whatever way you find most convincing."
        meaning = STYLES.get(instruction)
        return f"make a {instruction} argument" + (f" ({meaning})." if meaning else ".")

    def judge_chats(self, scenario: Scenario, messages: Sequence[str]) -> list[Chat]:
        """Two questions, who argued more convincingly, one per order of the sides (seat 0's
        first, then seat 1's), each after two worked examples (``JUDGE_EXAMPLES``): a judge
        that favours the side named first favours each seat once."""
        examples = [
            (self._judge_question(EXAMPLE, ex, order), answer)
            for ex, order, answer in JUDGE_EXAMPLES
        ]
        return [
            few_shot(JUDGE_SYSTEM, examples, self._judge_question(scenario, messages, order))
            for order in ((0, 1), (1, 0))
        ]

    def _judge_question(
        self, scenario: Scenario, messages: Sequence[str], order: tuple[int, int]
    ) -> str:
        first, second = (scenario.names[i] for i in order)
        sides = ", ".join(
            f"{scenario.names[i]} argued {scenario.private[i].word} it" for i in order
        )
        return (
            f"Motion: {quote(scenario.topic)}. {sides}.\n\n"
            f"Debate:\n{self.transcript(scenario, messages)}\n\n"
            f"Who argued more convincingly, {first} or {second}? End with one line: "
            f"WINNER: <name>"
        )

    def parse_judgement(self, scenario: Scenario, answers: Sequence[str]) -> Verdict:
        """The mean over the answers (one per order of the sides) of +1 / −1 for the debater
        each names (``WINNER: <name>``, else the one name on its last line): (0, 0) when the
        two orders disagree; value None when any answer names neither or both."""
        names = [n.lower() for n in scenario.names]
        wins = [self._winner(answer, names) for answer in answers]
        text = "\n---\n".join(answers)
        if not wins or any(w is None for w in wins):
            return Verdict(None, text, "failed")
        pays = [self._pay(w) for w in wins if w is not None]
        return Verdict(tuple(sum(p[s] for p in pays) / len(pays) for s in (0, 1)), text)

    @staticmethod
    def _winner(answer: str, names: list[str]) -> int | None:
        tagged = [m.group(1).lower() for m in _WINNER.finditer(answer)]
        picked = tagged[-1] if tagged and tagged[-1] in names else None
        if picked is None:
            lines = [ln for ln in answer.splitlines() if ln.strip()]
            last = lines[-1].lower() if lines else ""
            hits = [n for n in names if re.search(rf"\b{n}\b", last)]
            picked = hits[0] if len(hits) == 1 else None
        return None if picked is None else names.index(picked)

    def judge_choices(self, scenario: Scenario) -> tuple[str, ...]:
        """The two debaters' names."""
        return scenario.names

    def judgement_from_choice(self, scenario: Scenario, choice: str) -> tuple[float, float]:
        """+1 to the chosen debater, −1 to the other."""
        return self._pay(scenario.names.index(choice))

    @staticmethod
    def _pay(winner: int) -> tuple[float, float]:
        return (1.0, -1.0) if winner == 0 else (-1.0, 1.0)
