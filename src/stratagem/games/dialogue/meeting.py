"""Meeting scheduling (seed 003 §3.2): agree on a day; each seat values the days it is free.

Private to each seat: the days it is free and what each of those days is worth to it (1–10; a
day it is not free is worth nothing). Action: the day to push for, or ``any``. Messages end with
``PROPOSE: <day>`` or ``ACCEPT``. The meeting is set when a seat accepts the other's standing
proposal, or proposes the very day the other last proposed. A meeting set on a day both seats are
free pays each seat its value of that day; any other ending (no agreement, or agreement on a day
one of them cannot make) pays both 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stratagem.errors import ConfigError
from stratagem.games.dialogue.base import (
    ANY,
    Chat,
    Domain,
    Line,
    Outcome,
    Scenario,
    Verdict,
    few_shot,
    is_echo,
    keyword_hits,
    last_line,
    last_number,
    pick_names,
    register,
)
from stratagem.seeding import rng

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MIN_FREE, MAX_FREE = 3, 5  # how many days a seat is free
VALUE_RANGE = (1, 10)  # what a free day is worth
# lenient on the keyword's form (PROPOSED:, Proposal:), strict on the day; ACCEPT in capitals,
# or alone on its line in any case ("I accept, maybe" is not an acceptance); both read on the
# message's last line only (see ``Domain.parse_line``)
_PROPOSE = re.compile(r"PROPOS(?:E|ED|AL)\s*:\s*\**\s*(" + "|".join(DAYS) + r")\b", re.I)
_ACCEPT = re.compile(r"\bACCEPT\b|(?i:^\W*accept(?:ed)?\W*$)", re.MULTILINE)


@dataclass(frozen=True)
class Calendar:
    """One seat's private information: its free days and the value of each."""

    free: tuple[str, ...]
    values: Mapping[str, int]  # free day -> value

    def value(self, day: str) -> int:
        """What a meeting on ``day`` is worth to the seat (0 when it is not free)."""
        return self.values.get(day, 0) if day in self.free else 0


JUDGE_SYSTEM = "You score negotiations exactly."
# worked examples for the judge (our own): an agreement on a day both are free, no agreement,
# and an agreement on a day one of them cannot make; in plain words, as the judged dialogues are
EXAMPLE = Scenario(
    "meeting",
    -1,
    ("Pat", "Kim"),
    (
        Calendar(("Monday", "Wednesday", "Friday"), {"Monday": 3, "Wednesday": 9, "Friday": 5}),
        Calendar(
            ("Wednesday", "Thursday", "Saturday"), {"Wednesday": 4, "Thursday": 8, "Saturday": 2}
        ),
    ),
    "",
)
JUDGE_EXAMPLES: tuple[tuple[tuple[str, ...], int, str], ...] = (
    (
        (
            "Hi Kim, could we meet on Wednesday? Pat",
            "Hi Pat, Wednesday suits me. See you then! Kim",
        ),
        0,
        "They agreed on Wednesday, and both are free that day. Pat's value of Wednesday is 9."
        "\nVALUE: 9",
    ),
    (
        ("Hi Kim, how about Friday? Pat", "Hi Pat, Friday is no good for me. Thursday? Kim"),
        1,
        "Kim turned Friday down and Pat never answered about Thursday: no day was agreed."
        "\nVALUE: 0",
    ),
    (
        ("Hi Kim, shall we meet on Monday? Pat", "Hi Pat, sure, Monday it is. Kim"),
        1,
        "They agreed on Monday, but Kim is not free on Monday, so the meeting cannot happen."
        "\nVALUE: 0",
    ),
)


@register
class Meeting(Domain):
    """Meeting scheduling: action = the day to push for."""

    name = "meeting"
    version = 3  # 2: the structured line on the last line only, not negated; 3: few-shot judge
    default_instructions = (*DAYS, ANY)  # every day, as in seed 003
    definitions = {day: f"the message proposes meeting on {day}" for day in DAYS}
    payoff_range = (0.0, float(VALUE_RANGE[1]))

    def check_instruction(self, instruction: str) -> None:
        """Refuses anything but a day of the week or ``any``."""
        if instruction != ANY and instruction not in DAYS:
            raise ConfigError(
                f"meeting instructions are days ({', '.join(DAYS)}) or 'any', not {instruction!r}"
            )

    def scenario(self, seed: int) -> Scenario:
        """Two calendars with at least one common free day; seat 0 opens by proposing its
        favourite free day."""
        r = rng(seed, "meeting")
        names = pick_names(r)
        while True:
            cals = []
            for _ in range(2):
                chosen = set(r.sample(DAYS, r.randint(MIN_FREE, MAX_FREE)))  # one draw per seat
                free = tuple(d for d in DAYS if d in chosen)
                cals.append(Calendar(free, {d: r.randint(*VALUE_RANGE) for d in free}))
            if set(cals[0].free) & set(cals[1].free):
                break
        best = max(cals[0].free, key=lambda d: (cals[0].values[d], -DAYS.index(d)))
        opening = (
            f"Hi {names[1]}, we need to meet next week. {best} would suit me best.\nPROPOSE: {best}"
        )
        return Scenario(self.name, seed, names, (cals[0], cals[1]), opening)

    def situation(self, scenario: Scenario, seat: int) -> str:
        """The task and the seat's calendar."""
        cal: Calendar = scenario.private[seat]
        worth = ", ".join(f"{d} {cal.values[d]}" for d in cal.free)
        other = scenario.names[1 - seat]
        return (
            f"You and {other} must agree on one day next week to meet. Only you know this: "
            f"you are free on {', '.join(cal.free)}; how much each of those days is worth to "
            f"you: {worth}. A day you are not free is worth nothing."
        )

    def instruction_text(self, instruction: str, scenario: Scenario, seat: int) -> str:
        """Push for the day: accept it if the other just proposed it, else propose it."""
        other = scenario.names[1 - seat]
        if instruction == ANY:
            return "choose yourself which day to propose, or whether to accept."
        return (
            f"push for {instruction}. If {other} just proposed {instruction}, accept it; "
            f"otherwise propose {instruction}."
        )

    def answer_format(self, scenario: Scenario, seat: int) -> str:
        """``PROPOSE: <day>`` or ``ACCEPT``."""
        return f"PROPOSE: <day> or ACCEPT (to accept {scenario.names[1 - seat]}'s proposed day)"

    def parse_line(self, text: str) -> Line | None:
        """The last ``PROPOSE: <day>`` or ``ACCEPT`` on the message's last non-empty line, not
        negated ("I will not ACCEPT"), and None for an echo of the answer format."""
        line = last_line(text)
        if is_echo(line):
            return None
        found = [
            (m.start(), Line("propose", day=m.group(1).title()))
            for m in keyword_hits(_PROPOSE, line)
        ]
        found += [(m.start(), Line("accept")) for m in keyword_hits(_ACCEPT, line)]
        return max(found, key=lambda x: x[0])[1] if found else None

    def settle(self, messages: Sequence[str]) -> str | None:
        """The day agreed on, or None: an accept of the other's standing proposal, or a
        proposal of the day the other last proposed."""
        standing: dict[int, str] = {}
        for i, text in enumerate(messages):
            seat, line = i % 2, self.parse_line(text)
            if line is None:
                continue
            if line.kind == "accept" and (1 - seat) in standing:
                return standing[1 - seat]
            if line.kind == "propose":
                if standing.get(1 - seat) == line.day:
                    return line.day
                standing[seat] = line.day
        return None

    def follows(self, scenario: Scenario, messages: Sequence[str], instruction: str) -> bool:
        """The last message proposes the instructed day, or settles the meeting on it."""
        line = self.parse_line(messages[-1])
        if line is not None and line.kind == "propose":
            return line.day == instruction
        return self.settle(messages) == instruction

    def ended(self, scenario: Scenario, messages: Sequence[str]) -> bool:
        """Over once a day is agreed."""
        return self.settle(messages) is not None

    def payoff(self, scenario: Scenario, messages: Sequence[str]) -> tuple[float, float]:
        """Each seat's value of the agreed day when both are free that day, else 0."""
        return self._pay(scenario, self.settle(messages))

    def _pay(self, scenario: Scenario, day: str | None) -> tuple[float, float]:
        a, b = scenario.private
        if day is None or day not in a.free or day not in b.free:
            return 0.0, 0.0
        return float(a.value(day)), float(b.value(day))

    def judge_chats(self, scenario: Scenario, messages: Sequence[str]) -> list[Chat]:
        """One question per seat, what does the dialogue pay that seat, after three worked
        examples (``JUDGE_EXAMPLES``)."""
        examples = [
            (self._judge_question(EXAMPLE, ex, seat), answer) for ex, seat, answer in JUDGE_EXAMPLES
        ]
        return [
            few_shot(JUDGE_SYSTEM, examples, self._judge_question(scenario, messages, seat))
            for seat in (0, 1)
        ]

    def _judge_question(self, scenario: Scenario, messages: Sequence[str], seat: int) -> str:
        a, b = scenario.names
        name = scenario.names[seat]
        facts = "\n".join(
            f"{n} is free on {', '.join(c.free)}; day values: "
            + ", ".join(f"{d} {c.values[d]}" for d in c.free)
            for n, c in zip(scenario.names, scenario.private, strict=True)
        )
        return (
            f"{a} and {b} tried to agree on a meeting day.\n{facts}\n\n"
            f"Dialogue:\n{self.transcript(scenario, messages)}\n\n"
            f"If they agreed on a day on which both are free, {name} earns "
            f"{name}'s value of that day; otherwise {name} earns 0. What does "
            f"{name} earn? End with one line: VALUE: <number>"
        )

    def parse_judgement(self, scenario: Scenario, answers: Sequence[str]) -> Verdict:
        """Both numbers, or value None when either answer holds no number."""
        values = [last_number(a) for a in answers]
        if any(v is None for v in values):
            return Verdict(None, "\n---\n".join(answers), "failed")
        return Verdict((values[0], values[1]), "\n---\n".join(answers))

    def templated(self, seed: int, outcome: Outcome) -> tuple[Scenario, tuple[str, ...]]:
        """Seat 0 asks for a day, seat 1 agrees (valid: a day both are free), refuses to meet
        at all (rejected) or asks for another day (incomplete)."""
        scenario = self.scenario(seed)
        (a, b), (ca, cb) = scenario.names, scenario.private
        r = rng(seed, "meeting-template", outcome)
        common = [d for d in ca.free if d in cb.free]
        day = r.choice(common if outcome == "valid" else list(ca.free))
        ask = f"Hi {b}, would you be able to meet on {day}? Best, {a}"
        answer = {
            "valid": f"Hi {a}, yes, {day} works for me. See you then! {b}",
            "rejected": f"Hi {a}, no, I would rather not meet next week at all. {b}",
            "incomplete": f"Hi {a}, {day} does not suit me; could we look at another day? {b}",
        }[outcome]
        return scenario, (ask, answer)

    def exact_payoff(
        self, scenario: Scenario, messages: Sequence[str], outcome: Outcome
    ) -> tuple[float, float]:
        """Both values of the asked day for a valid dialogue, else 0 and 0."""
        if outcome != "valid":
            return 0.0, 0.0
        day = next(d for d in DAYS if d in messages[0])
        return self._pay(scenario, day)
