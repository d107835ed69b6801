"""Judged payoffs (debate): unparseable answers are recorded failures, never 0."""

from __future__ import annotations

import pytest

from stratagem.backends.cache import CachedBackend
from stratagem.backends.scripted import ScriptedBackend
from stratagem.games.dialogue import get_domain
from stratagem.solvers.dialogue import DialogueTree, JudgeFailure, expand
from stratagem.tree import TERMINAL, walk


def debate_backend(verdict: str, probs=None) -> ScriptedBackend:
    def script(chat):
        if chat[0]["content"].startswith("You judge"):
            return verdict
        return "A logical point." if "logos" in chat[-1]["content"] else "Think of the children."

    return ScriptedBackend(script, probs=probs)


def debate_tree(backend, **kwargs) -> DialogueTree:
    domain = get_domain("debate", ("logos", "pathos"))
    return DialogueTree(
        domain, domain.scenario(3), CachedBackend(backend), replies=2, seeds=1, **kwargs
    )


def test_unparseable_verdict_is_a_recorded_failure():
    backend = debate_backend("Both made fine points, it is hard to say.")
    tree = debate_tree(backend, judge_fallback=False)
    stats = expand([tree])
    assert stats.judge_failures == 4 and stats.judged == 0
    assert backend.calls == [2, 4, 4]  # two message depths, then the judge for all 4 leaves
    leaves = [n for n in walk(tree.root) if n.player == TERMINAL]
    assert all(tree.outcomes[n.path].source == "failed" for n in leaves)
    with pytest.raises(JudgeFailure, match="did not parse"):
        leaves[0].returns()


def test_parsed_verdict_pays_plus_and_minus_one():
    tree = debate_tree(debate_backend("placeholder"))
    names = tree.scenario.names
    backend = debate_backend(f"Clear case.\nWINNER: {names[1]}")
    tree = debate_tree(backend)
    stats = expand([tree])
    assert stats.judged == 4 and stats.judge_failures == 0
    assert {tree.outcomes[p].values for p in tree.outcomes} == {(-1.0, 1.0)}


def test_fallback_uses_the_constrained_choice_and_says_so():
    tree = debate_tree(debate_backend("placeholder"))
    a, b = tree.scenario.names
    backend = debate_backend("no idea", probs=lambda chat, cs: {a: 0.7, b: 0.3})
    tree = debate_tree(backend)
    stats = expand([tree])
    assert stats.judge_fallbacks == 4 and backend.prob_calls == [4]
    assert all(o.source == "fallback" and o.values == (1.0, -1.0) for o in tree.outcomes.values())
