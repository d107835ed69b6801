"""Dialogue games: the parts every domain shares (seed 003 §2–3, SPEC §9).

A dialogue game is played over one *scenario*: two named seats, each with private information,
and an opening message that seat 0 has already sent. The seats then write ``replies`` more
messages, alternating, seat 1 first. Before each message the writer's player picks an
*instruction* (a tone, a day, an argument style, or ``any``, the uninformative baseline), then
chance picks one of k LLM sampling seeds, and the LLM writes the message from the domain's
header (names, private information, the instruction) and the dialogue so far. The solver tree
over these choices is built in ``solvers.dialogue``; this package holds only rules, prompts and
parsing, and never calls a model.

A domain pays exactly where its messages end with a structured line (``PROPOSE: Thursday``,
``TRADE: give 2 kiwi, receive 1 banana``, ``ACCEPT``, ``REJECT``); a dialogue whose lines never
settle anything is a legitimate "no deal" and pays 0 by the rules, not by a parsing default.
Where no exact payoff exists (debate) the domain renders a judge prompt and parses its verdict;
an answer that does not parse is ``None`` here, which callers record as a failure.

Why dialogue games are not text games (the ``Game`` protocol in ``game.py``): there an agent
reads an observation and answers with an action token the game parses; here the players'
actions are instructions *to* the model, a chance node stands between the instruction and the
text, and a payoff needs the whole tree of continuations. No agent could play one through
``Episode``; the solver tree is the interface.

Departures from seed 003: the payoff of meeting scheduling and fruit trading comes from
structured last lines, not an LLM reward model (the paper's reward model is kept as the judge
whose accuracy ``solvers.dialogue.metrics`` measures); scenarios come from seeded tables, not
from an LLM asked for new names and endowments; the dialogue ends early when a deal is accepted
or rejected instead of asking an LLM whether it has ended.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.games.quoting import quote

ANY = "any"  # the uninformative instruction: the baseline LLM always plays it
Chat = list[dict[str, str]]
Outcome = Literal["valid", "rejected", "incomplete"]  # judge-accuracy dialogue types (App. C)
OUTCOMES: tuple[Outcome, ...] = ("valid", "rejected", "incomplete")
MAX_MESSAGE_CHARS = 400  # a message longer than this is cut (the model rambling on)

NAMES = tuple(
    "Amara Bruno Chiara Dmitri Elif Farid Greta Hiro Ines Jonas Kavya Lars Mei"
    " Nikolai Olu Priya Quentin Rosa Sven Tamsin Umar Vera Wanjiru Xavier Yusuf Zofia".split()
)


@dataclass(frozen=True)
class Scenario:
    """One procedurally generated game: names, each seat's private information, public facts,
    and seat 0's opening message. ``private`` holds a domain's own typed record per seat."""

    domain: str
    seed: int
    names: tuple[str, str]
    private: tuple[Any, Any]
    opening: str
    topic: str = ""  # public facts a domain needs (the debate motion)

    @property
    def id(self) -> str:
        """A short stable id: the domain and the scenario seed."""
        return f"{self.domain}-{self.seed}"


@dataclass(frozen=True)
class Line:
    """A message's parsed structured line: its kind and its typed content."""

    kind: Literal["propose", "trade", "accept", "reject"]
    day: str = ""  # meeting: the day proposed
    give: tuple[int, str] = (0, "")  # fruit: (count, fruit) the proposer gives
    receive: tuple[int, str] = (0, "")  # fruit: (count, fruit) the proposer receives


@dataclass(frozen=True)
class Verdict:
    """A judge's (or classifier's) answer: the parsed value, or None when nothing parsed."""

    value: Any
    text: str
    status: Literal["ok", "fallback", "failed"] = "ok"


@dataclass
class Domain:
    """A dialogue domain: scenario generator, header, instruction set and payoff.

    Subclasses fill in the domain's tables and the methods marked below; the shared methods
    render the chat a seat's LLM answers and the judge and classifier prompts.
    """

    name: ClassVar[str]
    version: ClassVar[int] = 1  # bumps when prompts or rules change (cache keys carry it)
    default_instructions: ClassVar[tuple[str, ...]]
    definitions: ClassVar[Mapping[str, str]] = {}  # instruction -> meaning, for the classifier
    payoff_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)  # for the judge's Norm error
    structured: ClassVar[bool] = True  # whether messages end with a structured line

    instructions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.instructions = tuple(self.instructions or self.default_instructions)
        if not self.instructions:
            raise ConfigError(f"{self.name}: the instruction set is empty")
        twice = sorted({i for i in self.instructions if self.instructions.count(i) > 1})
        if twice:
            raise ConfigError(f"{self.name}: instructions given twice: {', '.join(twice)}")
        for instruction in self.instructions:
            self.check_instruction(instruction)

    # -- what a domain defines ------------------------------------------------------------

    def scenario(self, seed: int) -> Scenario:
        """Returns the scenario of ``seed``: names, private information and opening message."""
        raise NotImplementedError

    def situation(self, scenario: Scenario, seat: int) -> str:
        """Returns what ``seat`` knows before any message: the task and its private facts."""
        raise NotImplementedError

    def instruction_text(self, instruction: str, scenario: Scenario, seat: int) -> str:
        """Returns the sentence that tells the LLM how to write under ``instruction``."""
        raise NotImplementedError

    def answer_format(self, scenario: Scenario, seat: int) -> str:
        """Returns how the message must end (its structured line), or "" for free text."""
        return ""

    def parse_line(self, text: str) -> Line | None:
        """Returns the structured line of a message, or None. Domains read it from the last
        non-empty line only (``last_line``), skip negated keywords (``negated``) and echoes of
        the answer format (``is_echo``); the last keyword of that line wins."""
        return None

    def ended(self, scenario: Scenario, messages: Sequence[str]) -> bool:
        """Returns whether the dialogue is over before its reply limit (a deal settled)."""
        return False

    def payoff(self, scenario: Scenario, messages: Sequence[str]) -> tuple[float, float] | None:
        """Returns both seats' exact payoffs of a finished dialogue, or None when this domain
        has no exact payoff and a judge must decide."""
        return None

    def judge_chats(self, scenario: Scenario, messages: Sequence[str]) -> list[Chat]:
        """Returns the judge prompts for a finished dialogue (one per question asked)."""
        raise NotImplementedError

    def parse_judgement(self, scenario: Scenario, answers: Sequence[str]) -> Verdict:
        """Returns both seats' payoffs read from the judge's answers (``value`` None when an
        answer does not parse)."""
        raise NotImplementedError

    def judge_choices(self, scenario: Scenario) -> tuple[str, ...] | None:
        """The closed answer set of every judge question, for a constrained fallback, or None
        when the judge answers with numbers. A domain with choices asks questions that each
        decide both payoffs (debate: one per order of the sides): ``parse_judgement`` of one
        answer is that question's verdict, and the payoff is the mean over the questions."""
        return None

    def judgement_from_choice(self, scenario: Scenario, choice: str) -> tuple[float, float]:
        """Both payoffs when the constrained fallback picked ``choice`` for one question."""
        raise NotImplementedError

    def templated(self, seed: int, outcome: Outcome) -> tuple[Scenario, tuple[str, ...]]:
        """Returns a two-message dialogue of type ``outcome`` in plain words (no structured
        lines), for judge accuracy; ``exact_payoff`` gives its true payoffs."""
        raise ConfigError(f"{self.name} has no templated dialogues (no exact payoff)")

    def exact_payoff(
        self, scenario: Scenario, messages: Sequence[str], outcome: Outcome
    ) -> tuple[float, float]:
        """The true payoffs of a templated dialogue (see ``templated``)."""
        raise NotImplementedError

    def follows(self, scenario: Scenario, messages: Sequence[str], instruction: str) -> bool | None:
        """Whether the last of ``messages`` follows ``instruction``, read from its structured
        line, or None where the line cannot tell (a tone, an argument style)."""
        return None

    def check_instruction(self, instruction: str) -> None:
        """Raises ``ConfigError`` when ``instruction`` is not one this domain can follow."""
        if not instruction.strip() or "\n" in instruction:
            raise ConfigError(f"{self.name}: bad instruction {instruction!r}")

    # -- shared rendering -----------------------------------------------------------------

    def chat(
        self, scenario: Scenario, messages: Sequence[str], seat: int, instruction: str
    ) -> Chat:
        """Returns the chat the LLM answers as ``seat``: a system turn with the header (the
        seat's situation and the answer format), then the dialogue with the seat's own messages
        as assistant turns and the other's as user turns; the last user turn carries the
        instruction. ``messages`` starts with seat 0's opening; the other seat wrote the last.
        """
        me, other = scenario.names[seat], scenario.names[1 - seat]
        head = [
            f"You are {me}, writing messages to {other}.",
            self.situation(scenario, seat),
            "Write one short message of at most three sentences, in your own voice.",
        ]
        form = self.answer_format(scenario, seat)
        if form:
            head.append(f"End your message with one line: {form}.")
        chat: Chat = [{"role": "system", "content": "\n".join(head)}]
        for i, text in enumerate(messages):
            role = "assistant" if i % 2 == seat else "user"
            chat.append({"role": role, "content": text})
        if chat[-1]["role"] != "user":
            raise ValueError("a seat replies to the other seat's message")
        note = self.instruction_text(instruction, scenario, seat)
        chat[-1] = {
            "role": "user",
            "content": f"{chat[-1]['content']}\n\n(Note for {me}'s reply: {note})",
        }
        return chat

    def transcript(self, scenario: Scenario, messages: Sequence[str]) -> str:
        """The dialogue as quoted lines, ``Name: "text"``, seat 0 first."""
        return "\n".join(f"{scenario.names[i % 2]}: {quote(m)}" for i, m in enumerate(messages))

    def observation(
        self, scenario: Scenario, messages: Sequence[str], seat: int, own: Sequence[str]
    ) -> str:
        """The information state of ``seat`` as text: its situation, the dialogue, and its own
        earlier instructions (what the imitation policy embeds)."""
        mine = ", ".join(own) if own else "none yet"
        return (
            f"{self.situation(scenario, seat)}\nYour earlier instructions: {mine}\n"
            f"{self.transcript(scenario, messages)}"
        )

    def clean(self, text: str, scenario: Scenario, seat: int) -> str:
        """A generated message as sent: the writer's own name prefix dropped, cut where the
        model starts writing the other seat's turn or echoes its instruction note (which is
        private to the writer), stripped and capped in length."""
        me, other = scenario.names[seat], scenario.names[1 - seat]
        text = re.sub(rf"^\s*{re.escape(me)}\s*:\s*", "", text.strip())
        lines = []
        for line in text.splitlines():
            if re.match(rf"^\s*({re.escape(other)}\s*:|\(?\s*Note for\b)", line):
                break
            lines.append(line)
        return "\n".join(lines).strip()[:MAX_MESSAGE_CHARS]

    def stop(self, text: str) -> bool:
        """Whether generation can stop: the last non-empty line is a complete structured line."""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return bool(lines) and self.parse_line(lines[-1]) is not None

    def classifier_chat(self, message: str, choices: Sequence[str]) -> Chat:
        """The steering classifier's prompt: which of ``choices`` the message reflects, with
        each choice's definition (seed 003 App. B)."""
        lines = [f"- {c}: {self.definitions.get(c, c)}" for c in choices]
        return [
            {
                "role": "system",
                "content": "You label messages. Answer with one word from the list, nothing else.",
            },
            {
                "role": "user",
                "content": (
                    f"Definitions:\n{chr(10).join(lines)}\n\nMessage: {quote(message)}\n\n"
                    f"Which one does the message reflect? Answer with one of: "
                    f"{', '.join(choices)}."
                ),
            },
        ]

    def parse_label(self, answer: str, choices: Sequence[str]) -> str | None:
        """The one choice the classifier's answer names (on its last non-empty line, else
        anywhere), or None when it names none or several."""
        lines = [ln for ln in answer.splitlines() if ln.strip()]
        for text in ([lines[-1]] if lines else []) + [answer]:
            found = {c for c in choices if re.search(rf"\b{re.escape(c)}\b", text, re.IGNORECASE)}
            if len(found) == 1:
                return found.pop()
        return None


# the structured line is read where the protocol puts it, and only when it decides something
_NEGATED = re.compile(
    r"(?:\bnot|\bnever|n't|\bcannot|\brefuse\s+to|\bunable\s+to)\W+(?:\w+\W+){0,2}$", re.I
)
_ECHO = re.compile(r"<[^<>\n]*>|\bor\s+(?:ACCEPT|REJECT)\b|\b(?:ACCEPT|REJECT)\s+or\b")


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (where a message's structured line must be), or ""."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def is_echo(line: str) -> bool:
    """Whether ``line`` repeats the answer format instead of deciding: a ``<placeholder>``, or
    alternatives (``... or ACCEPT``, ``ACCEPT or REJECT``)."""
    return _ECHO.search(line) is not None


def negated(line: str, at: int) -> bool:
    """Whether the keyword at ``at`` in ``line`` is negated within its clause ("I will not
    ACCEPT", "I don't want to ACCEPT"): a negation at most three words before it, with no
    sentence end between."""
    clause = re.split(r"[.!?;]", line[:at])[-1]
    return _NEGATED.search(clause) is not None


def keyword_hits(pattern: re.Pattern[str], line: str) -> list[re.Match[str]]:
    """The matches of ``pattern`` in ``line`` that are not negated."""
    return [m for m in pattern.finditer(line) if not negated(line, m.start())]


def digest(*parts: str) -> str:
    """A short stable digest of texts (information-set keys)."""
    h = hashlib.blake2b(digest_size=10)
    for part in parts:
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()


def pick_names(rng: Any) -> tuple[str, str]:
    """Two distinct names drawn with ``rng``."""
    first, second = rng.sample(NAMES, 2)
    return first, second


DOMAINS: dict[str, type[Domain]] = {}


def register(cls: type[Domain]) -> type[Domain]:
    """Class decorator: adds a domain to ``DOMAINS`` under its ``name``."""
    DOMAINS[cls.name] = cls
    return cls


def get_domain(name: str, instructions: Sequence[str] | None = None) -> Domain:
    """Returns the domain ``name`` with ``instructions`` (default: the domain's own);
    raises ``UnknownNameError`` for a domain that does not exist."""
    if name not in DOMAINS:
        raise UnknownNameError("dialogue domain", name, DOMAINS)
    return DOMAINS[name](instructions=tuple(instructions or ()))


def few_shot(system: str, examples: Sequence[tuple[str, str]], question: str) -> Chat:
    """A judge chat with worked examples (seed 003 and OpenSpiel's ``chat_games`` prompt their
    payoff judges few-shot): the system turn, each example as a user question and the
    assistant's answer, then ``question``. Examples are written like the real question, so the
    judge sees the format and the rule applied before it answers."""
    chat: Chat = [{"role": "system", "content": system}]
    for asked, answered in examples:
        chat += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    return [*chat, {"role": "user", "content": question}]


def last_number(text: str) -> float | None:
    """The number after ``VALUE:`` on the answer's last such line, else the last number in the
    text, or None."""
    tagged = re.findall(r"VALUE\s*:\s*(-?\d+(?:\.\d+)?)", text, re.IGNORECASE)
    if tagged:
        return float(tagged[-1])
    numbers = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?", text)
    return float(numbers[-1]) if numbers else None
