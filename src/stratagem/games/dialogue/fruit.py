"""Fruit trading (seed 003 §3.2): swap fruit to gain value, each seat valuing fruit privately.

Private to each seat: its basket (0–4 of each fruit) and what one piece of each fruit is worth to
it (1–10). Action: the tone of the message (``calm``, ``assertive``, ``submissive``, ... or
``any``; PSRO may add new tones). Messages end with ``TRADE: give N fruit, receive M fruit`` (a
new offer, from the writer's side), ``ACCEPT`` or ``REJECT`` (the other's standing offer). An
accepted offer is carried out when both baskets hold the fruit it moves; then each seat earns the
value of what it receives minus the value of what it gives. A rejected offer, an accepted offer
one basket cannot pay, or no deal by the reply limit pays both 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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

FRUITS = ("apple", "banana", "blueberry", "kiwi")
MAX_COUNT = 4  # most pieces of one fruit in a basket
VALUE_RANGE = (1, 10)
TONES = {
    "calm": "not showing nervousness, anger or other strong feelings",
    "assertive": "confident and forceful, insisting on what the writer wants",
    "submissive": "yielding to the other's wishes, meek and eager to please",
    "angry": "annoyed or hostile, showing strong displeasure",
    "relaxed": "easy-going and unhurried, without pressure",
    "enthusiastic": "eager and excited about the trade",
    "friendly": "warm and kind towards the other",
    "sarcastic": "mocking, saying the opposite of what is meant",
    "polite": "courteous and respectful",
    "desperate": "urgently in need, pleading for a deal",
}
_FRUIT = r"(apple|banana|blueberr(?:y|ies)|kiwi)(?:e?s)?"
_TRADE = re.compile(
    rf"TRADE\s*:\s*\**\s*give\s+(\d+)\s+{_FRUIT}\W+(?:and\s+|in\s+exchange\s+for\s+)?"
    rf"(?:receive|get)\s+(\d+)\s+{_FRUIT}",
    re.IGNORECASE,
)
_ACCEPT = re.compile(r"\bACCEPT\b|(?i:^\W*accept(?:ed)?\W*$)", re.MULTILINE)
_REJECT = re.compile(r"\bREJECT\b|(?i:^\W*reject(?:ed)?\W*$)", re.MULTILINE)


def _fruit(word: str) -> str:
    word = word.lower()
    return "blueberry" if word.startswith("blueberr") else word


@dataclass(frozen=True)
class Basket:
    """One seat's private information: how many of each fruit it has and what each is worth."""

    counts: Mapping[str, int]
    values: Mapping[str, int]


@dataclass(frozen=True)
class Offer:
    """A standing trade offer: ``seat`` gives ``give`` and receives ``receive``."""

    seat: int
    give: tuple[int, str]
    receive: tuple[int, str]


JUDGE_SYSTEM = "You score negotiations exactly."
# worked examples for the judge (our own): a trade that pays, a refusal, and a trade that costs
# the seat asked about; in plain words, as the judged dialogues are
EXAMPLE = Scenario(
    "fruit",
    -1,
    ("Pat", "Kim"),
    (
        Basket(
            {"apple": 3, "banana": 0, "blueberry": 1, "kiwi": 2},
            {"apple": 2, "banana": 7, "blueberry": 5, "kiwi": 3},
        ),
        Basket(
            {"apple": 0, "banana": 2, "blueberry": 3, "kiwi": 1},
            {"apple": 6, "banana": 3, "blueberry": 4, "kiwi": 9},
        ),
    ),
    "",
)
JUDGE_EXAMPLES: tuple[tuple[tuple[str, ...], int, str], ...] = (
    (
        ("Hi Kim, I would give you 2 apple for 1 banana. Deal? Pat", "Yes, happy to trade! Kim"),
        0,
        "They traded: Pat receives 1 banana (7) and gives 2 apple (2 x 2 = 4); 7 - 4 = 3."
        "\nVALUE: 3",
    ),
    (
        ("Hi Kim, 1 kiwi for 2 blueberry? Pat", "No thanks, I will keep my blueberries. Kim"),
        1,
        "Kim refused, so no trade happened.\nVALUE: 0",
    ),
    (
        ("Hi Kim, I give you 1 blueberry for 1 kiwi. Pat", "Deal, here is my kiwi. Kim"),
        1,
        "They traded: Kim receives 1 blueberry (4) and gives 1 kiwi (9); 4 - 9 = -5.\nVALUE: -5",
    ),
)


@register
class Fruit(Domain):
    """Fruit trading: action = the tone of the message."""

    name = "fruit"
    version = 3  # 2: the structured line on the last line only, not negated; 3: few-shot judge
    default_instructions = ("calm", "assertive", "submissive", ANY)
    definitions = TONES
    payoff_range = (-20.0, 20.0)  # the templated trades: 1–2 pieces, values 1–10

    def scenario(self, seed: int) -> Scenario:
        """Two baskets of at least four pieces; seat 0 opens by offering one or two of its
        least valued fruit for one of the fruit it values most."""
        r = rng(seed, "fruit")
        names = pick_names(r)
        baskets = []
        for _ in range(2):
            while True:
                counts = {f: r.randint(0, MAX_COUNT) for f in FRUITS}
                if sum(counts.values()) >= 4 and sum(1 for c in counts.values() if c) >= 2:
                    break
            baskets.append(Basket(counts, {f: r.randint(*VALUE_RANGE) for f in FRUITS}))
        mine = baskets[0]
        owned = [f for f in FRUITS if mine.counts[f]]
        give = min(owned, key=lambda f: (mine.values[f], FRUITS.index(f)))
        want = max(
            (f for f in FRUITS if f != give), key=lambda f: (mine.values[f], -FRUITS.index(f))
        )
        n = min(2, mine.counts[give])
        opening = (
            f"Hi {names[1]}, I have some {give} to spare and I am after {want}. Shall we trade?\n"
            f"TRADE: give {n} {give}, receive 1 {want}"
        )
        return Scenario(self.name, seed, names, (baskets[0], baskets[1]), opening)

    def situation(self, scenario: Scenario, seat: int) -> str:
        """The task and the seat's basket."""
        basket: Basket = scenario.private[seat]
        have = ", ".join(f"{basket.counts[f]} {f}" for f in FRUITS)
        worth = ", ".join(f"{f} {basket.values[f]}" for f in FRUITS)
        return (
            f"You and {scenario.names[1 - seat]} are trading fruit. Only you know this: your "
            f"basket holds {have}; one piece is worth to you: {worth}. You gain the value of "
            f"what you receive minus the value of what you give."
        )

    def instruction_text(self, instruction: str, scenario: Scenario, seat: int) -> str:
        """Write in the tone ``instruction`` (any word PSRO proposes works)."""
        if instruction == ANY:
            return "write in whatever tone you like."
        return f"use a {instruction} tone."

    def answer_format(self, scenario: Scenario, seat: int) -> str:
        """A ``TRADE:`` offer, ``ACCEPT`` or ``REJECT``."""
        other = scenario.names[1 - seat]
        return (
            "TRADE: give <n> <fruit>, receive <m> <fruit> (a new offer), or ACCEPT or REJECT "
            f"({other}'s last offer)"
        )

    def parse_line(self, text: str) -> Line | None:
        """The last ``TRADE:``, ``ACCEPT`` or ``REJECT`` on the message's last non-empty line,
        not negated ("I will not ACCEPT that."), and None for an echo of the answer format."""
        line = last_line(text)
        if is_echo(line):
            return None
        found = [
            (
                m.start(),
                Line(
                    "trade",
                    give=(int(m.group(1)), _fruit(m.group(2))),
                    receive=(int(m.group(3)), _fruit(m.group(4))),
                ),
            )
            for m in keyword_hits(_TRADE, line)
        ]
        found += [(m.start(), Line("accept")) for m in keyword_hits(_ACCEPT, line)]
        found += [(m.start(), Line("reject")) for m in keyword_hits(_REJECT, line)]
        return max(found, key=lambda x: x[0])[1] if found else None

    def settle(self, messages: Sequence[str]) -> tuple[Offer | None, bool]:
        """(the offer accepted, or None; whether the dialogue is settled). A reply settles the
        standing offer of the other seat by accepting or rejecting it; a new offer replaces it."""
        standing: Offer | None = None
        for i, text in enumerate(messages):
            seat, line = i % 2, self.parse_line(text)
            if line is None:
                continue
            if line.kind == "trade":
                standing = Offer(seat, line.give, line.receive)
            elif standing is not None and standing.seat != seat:
                return (standing if line.kind == "accept" else None), True
        return None, False

    def ended(self, scenario: Scenario, messages: Sequence[str]) -> bool:
        """Over once an offer is accepted or rejected."""
        return self.settle(messages)[1]

    def payoff(self, scenario: Scenario, messages: Sequence[str]) -> tuple[float, float]:
        """The value each seat gains from the accepted trade, or 0 and 0."""
        return self._pay(scenario, self.settle(messages)[0])

    def _pay(self, scenario: Scenario, offer: Offer | None) -> tuple[float, float]:
        if offer is None:
            return 0.0, 0.0
        p, o = offer.seat, 1 - offer.seat
        mine: Basket = scenario.private[p]
        theirs: Basket = scenario.private[o]
        (n_give, give), (n_get, get) = offer.give, offer.receive
        if give == get or mine.counts[give] < n_give or theirs.counts[get] < n_get:
            return 0.0, 0.0
        gains = [0.0, 0.0]
        gains[p] = float(n_get * mine.values[get] - n_give * mine.values[give])
        gains[o] = float(n_give * theirs.values[give] - n_get * theirs.values[get])
        return gains[0], gains[1]

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
            f"{n}: basket "
            + ", ".join(f"{k.counts[f]} {f}" for f in FRUITS)
            + "; value of one piece: "
            + ", ".join(f"{f} {k.values[f]}" for f in FRUITS)
            for n, k in zip(scenario.names, scenario.private, strict=True)
        )
        return (
            f"{a} and {b} negotiated a fruit trade.\n{facts}\n\n"
            f"Dialogue:\n{self.transcript(scenario, messages)}\n\n"
            f"If both agreed to a trade their baskets can pay, {name} earns the value "
            f"(to {name}) of the fruit {name} receives minus that of the fruit "
            f"{name} gives; otherwise {name} earns 0. What does {name} earn? End "
            f"with one line: VALUE: <number>"
        )

    def parse_judgement(self, scenario: Scenario, answers: Sequence[str]) -> Verdict:
        """Both numbers, or value None when either answer holds no number."""
        values = [last_number(a) for a in answers]
        if any(v is None for v in values):
            return Verdict(None, "\n---\n".join(answers), "failed")
        return Verdict((values[0], values[1]), "\n---\n".join(answers))

    def templated(self, seed: int, outcome: Outcome) -> tuple[Scenario, tuple[str, ...]]:
        """Seat 0 offers a trade both baskets can pay; seat 1 accepts (valid), refuses to
        trade (rejected) or asks for a different trade (incomplete)."""
        scenario = self.scenario(seed)
        (a, b), (ka, kb) = scenario.names, scenario.private
        r = rng(seed, "fruit-template", outcome)
        give = r.choice([f for f in FRUITS if ka.counts[f]])
        get = r.choice([f for f in FRUITS if kb.counts[f] and f != give])  # two kinds each
        n_give = r.randint(1, min(2, ka.counts[give]))
        n_get = r.randint(1, min(2, kb.counts[get]))
        ask = (
            f"Hi {b}, I would like to trade you {n_give} {give} for {n_get} {get}. "
            f"Would you like to trade with me? Best, {a}"
        )
        answer = {
            "valid": f"Hi {a}, yes, I would like to make that trade with you! Best, {b}",
            "rejected": f"Hi {a}, no, I do not want to make this trade with you. Thanks, {b}",
            "incomplete": f"Hi {a}, no, but would you accept a different trade? Best, {b}",
        }[outcome]
        return scenario, (ask, answer)

    def exact_payoff(
        self, scenario: Scenario, messages: Sequence[str], outcome: Outcome
    ) -> tuple[float, float]:
        """The trade's gains for a valid dialogue, else 0 and 0."""
        if outcome != "valid":
            return 0.0, 0.0
        m = re.search(r"trade you (\d+) (\w+) for (\d+) (\w+)", messages[0])
        assert m is not None
        offer = Offer(0, (int(m.group(1)), m.group(2)), (int(m.group(3)), m.group(4)))
        return self._pay(scenario, offer)
