"""Steering and judge accuracy on the scripted backend."""

from __future__ import annotations

import math

import pytest

from stratagem.backends.cache import CachedBackend
from stratagem.backends.scripted import ScriptedBackend
from stratagem.games.dialogue import get_domain
from stratagem.solvers.dialogue import DialogueTree, expand
from stratagem.solvers.dialogue.metrics import judge_accuracy, steering_accuracy, steering_samples

from .conftest import note


def fruit_trees(classifier):
    domain = get_domain("fruit", ("calm", "angry", "any"))

    def script(chat):
        if chat[0]["content"].startswith("You label"):
            return classifier(chat)
        return f"I write this {note(chat).split('use a ')[-1].split(' tone')[0]}ly."

    backend = ScriptedBackend(script, probs=lambda chat, cs: {c: float(c == "calm") for c in cs})
    cached = CachedBackend(backend)
    trees = [DialogueTree(domain, domain.scenario(s), cached, replies=1, seeds=1) for s in (0, 1)]
    expand(trees)
    return domain, trees, cached, backend


def test_steering_accuracy_per_instruction_and_overall():
    # a classifier that always answers "calm": right on calm messages, wrong on angry ones
    domain, trees, cached, _ = fruit_trees(lambda chat: "calm")
    samples = steering_samples(trees)
    assert sorted(s[2] for s in samples) == ["angry", "angry", "calm", "calm"]
    report = steering_accuracy(domain, samples, cached)
    assert report.labels == ("calm", "angry") and report.chance == 0.5
    assert report.per_instruction["calm"].value == 1.0
    assert report.per_instruction["angry"].value == 0.0
    assert report.overall.value == 0.5 and report.overall.n == 4
    assert report.exact is None  # a tone cannot be read off the structured line
    assert [r["instruction"] for r in report.rows()] == ["calm", "angry", "overall"]


def test_unreadable_labels_fall_back_or_count_as_wrong():
    domain, trees, cached, backend = fruit_trees(lambda chat: "I am not sure")
    samples = steering_samples(trees, limit=1)
    assert len(samples) == 2
    with_fallback = steering_accuracy(domain, samples, cached)
    assert with_fallback.fallbacks == 2 and backend.prob_calls == [2]
    assert with_fallback.per_instruction["calm"].value == 1.0  # the constrained choice: calm
    strict = steering_accuracy(domain, samples, cached, fallback=False)
    assert strict.failures == 2 and strict.overall.value == 0.0


def test_meeting_steering_has_an_exact_rate_too():
    domain = get_domain("meeting", ("Monday", "Friday", "any"))

    def script(chat):
        if chat[0]["content"].startswith("You label"):
            return "Monday"
        return "How about Monday?\nPROPOSE: Monday"

    cached = CachedBackend(ScriptedBackend(script))
    tree = DialogueTree(domain, domain.scenario(0), cached, replies=1, seeds=1)
    expand([tree])
    report = steering_accuracy(domain, steering_samples([tree]), cached)
    assert report.exact["Monday"].value == 1.0 and report.exact["Friday"].value == 0.0
    assert report.exact["overall"].value == 0.5


def test_judge_accuracy_norm_and_sign_errors():
    domain = get_domain("fruit")
    # a judge that always answers 0: exact on rejected and incomplete dialogues
    rows = judge_accuracy(
        domain, CachedBackend(ScriptedBackend(lambda c: "VALUE: 0")), per_outcome=5
    )
    by = {r.outcome: r for r in rows}
    assert [r.outcome for r in rows] == ["valid", "rejected", "incomplete", "all"]
    assert by["rejected"].norm == 0.0 and by["rejected"].sgn == 0.0 and by["rejected"].n == 10
    assert by["valid"].norm > 0 and by["valid"].sgn > 0
    assert by["all"].n == 30 and by["all"].failures == 0
    assert by["all"].norm == pytest.approx(by["valid"].norm / 3)


def test_judge_answers_without_a_number_are_failures_not_zero():
    domain = get_domain("meeting")
    rows = judge_accuracy(
        domain, CachedBackend(ScriptedBackend(lambda c: "They met.")), per_outcome=2
    )
    assert all(r.n == 0 and math.isnan(r.norm) for r in rows)
    assert rows[-1].failures == 12
