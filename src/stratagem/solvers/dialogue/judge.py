"""Payoffs of finished dialogues that their domain cannot score exactly: the LLM judge.

Every dialogue waiting for a verdict is judged in one batched backend call (greedy, seeded per
chat; a domain may ask several questions per dialogue, each after worked examples). Where an
answer does not parse, the domain has a closed verdict set and fallback is on, one more call asks
the backend's constrained choice between the verdicts for each such question (recorded as a
``fallback``). What still does not parse is recorded as ``failed`` and has no payoff: never 0
(a departure from OpenSpiel's ``chat_games``). A judge generation that failed (a backend error:
``backends.cache.failed``) is recorded as ``error``, without a payoff and without a fallback;
it was not cached, so a rerun asks again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from stratagem.backends.base import Backend, Chat, Sampling
from stratagem.backends.cache import failed, failure_text
from stratagem.errors import StratagemError
from stratagem.games.dialogue.base import Domain, Scenario
from stratagem.seeding import derive

JUDGE_SAMPLING = Sampling(temperature=0.0, max_new_tokens=64)


class JudgeFailure(StratagemError, RuntimeError):
    """A payoff was asked of a dialogue whose judge answer did not parse."""

    exit_code = 1


class GenerationFailure(StratagemError, RuntimeError):
    """A payoff was asked of a dialogue whose message or judge generation failed (a backend
    error); nothing of it was cached, so running again retries it."""

    exit_code = 1


@dataclass(frozen=True)
class Outcome:
    """A finished dialogue's payoff and where it came from: ``error`` when a generation failed
    (``error`` then says why), ``failed`` when the judge's answer did not parse."""

    values: tuple[float, float] | None  # None when the judge or a generation failed
    source: Literal["exact", "judge", "fallback", "failed", "error"]
    judge_text: str = ""
    error: str = ""


@dataclass(frozen=True)
class Dialogue:
    """A finished dialogue to judge: its domain, scenario, messages (opening included), and
    whether an unparsed answer may fall back to the constrained choice."""

    domain: Domain
    scenario: Scenario
    messages: tuple[str, ...]
    fallback: bool


def judge_dialogues(
    backend: Backend, sampling: Sampling, dialogues: Sequence[Dialogue]
) -> list[Outcome]:
    """Returns the outcome of each dialogue: one judge call for all of them (the i-th judge chat
    seeded with ``derive(0, "judge", i)``), then one constrained-choice call for the answers
    that fall back (see the module docstring)."""
    if not dialogues:
        return []
    chats, owners = _judge_chats(dialogues)
    seeds = [derive(0, "judge", i) for i in range(len(chats))]
    gens = backend.generate(chats, sampling, seeds=seeds)
    answers: list[list[str]] = [[] for _ in dialogues]
    errors: dict[int, str] = {}
    for n, gen in zip(owners, gens, strict=True):
        answers[n].append(gen.text)
        if failed(gen):
            errors.setdefault(n, f"judge generation failed: {failure_text(gen)}")
    outcomes: dict[int, Outcome] = {}
    retry: list[int] = []
    for n, (dialogue, texts) in enumerate(zip(dialogues, answers, strict=True)):
        outcome = _verdict(dialogue, texts, errors.get(n))
        if outcome is None:
            retry.append(n)
        else:
            outcomes[n] = outcome
    if retry:
        outcomes |= _fall_back(backend, [(n, dialogues[n], answers[n]) for n in retry])
    return [outcomes[n] for n in range(len(dialogues))]


def _judge_chats(dialogues: Sequence[Dialogue]) -> tuple[list[Chat], list[int]]:
    """Every dialogue's judge chats, one after the other, and the dialogue each belongs to."""
    chats: list[Chat] = []
    owners: list[int] = []
    for n, dialogue in enumerate(dialogues):
        for chat in dialogue.domain.judge_chats(dialogue.scenario, dialogue.messages):
            chats.append(chat)
            owners.append(n)
    return chats, owners


def _verdict(dialogue: Dialogue, texts: list[str], error: str | None) -> Outcome | None:
    """The outcome of ``dialogue`` from its judge answers ``texts`` (``error``: why a judge
    generation of it failed); None when an answer did not parse and it falls back to the
    constrained choice."""
    if error is not None:
        return Outcome(None, "error", "\n---\n".join(texts), error)
    verdict = dialogue.domain.parse_judgement(dialogue.scenario, texts)
    text = "\n---\n".join(texts)
    if verdict.value is not None:
        values = (float(verdict.value[0]), float(verdict.value[1]))
        return Outcome(values, "judge", text)
    if dialogue.fallback and dialogue.domain.judge_choices(dialogue.scenario):
        return None
    return Outcome(None, "failed", text)


def _fall_back(
    backend: Backend, retry: Sequence[tuple[int, Dialogue, list[str]]]
) -> dict[int, Outcome]:
    """One constrained-choice call for every judge question whose answer did not parse (the
    others keep their parsed verdict); each dialogue's payoff is the mean over its questions
    (see ``Domain.judge_choices``)."""
    asks: list[tuple[int, int, Chat, tuple[str, ...]]] = []
    for n, dialogue, texts in retry:
        domain, scenario = dialogue.domain, dialogue.scenario
        choices = tuple(domain.judge_choices(scenario) or ())
        for k, (chat, text) in enumerate(
            zip(domain.judge_chats(scenario, dialogue.messages), texts, strict=True)
        ):
            if domain.parse_judgement(scenario, [text]).value is None:
                follow_up = {
                    "role": "user",
                    "content": f"Answer with one of: {', '.join(choices)}.",
                }
                asks.append(
                    (n, k, [*chat, {"role": "assistant", "content": text}, follow_up], choices)
                )
    dists = backend.choice_probs([a[2] for a in asks], [a[3] for a in asks])
    picks: dict[tuple[int, int], str] = {}
    for (n, k, _, _), dist in zip(asks, dists, strict=True):
        picks[n, k] = max(dist, key=lambda c: (dist[c], -list(dist).index(c)))
    out = {}
    for n, dialogue, texts in retry:
        domain, scenario = dialogue.domain, dialogue.scenario
        pays = [
            domain.judgement_from_choice(scenario, picks[n, k])
            if (n, k) in picks
            else domain.parse_judgement(scenario, [text]).value
            for k, text in enumerate(texts)
        ]
        values = tuple(sum(float(p[s]) for p in pays) / len(pays) for s in (0, 1))
        chosen = ", ".join(picks[n, k] for k in range(len(texts)) if (n, k) in picks)
        text = "\n---\n".join(texts) + f"\n[fallback: {chosen}]"
        out[n] = Outcome((values[0], values[1]), "fallback", text)
    return out
