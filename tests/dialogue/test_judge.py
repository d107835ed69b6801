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
    # two message depths, then the judge for all 4 leaves, each in both orders of the sides
    assert backend.calls == [2, 4, 8]
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
    assert stats.judge_fallbacks == 4 and backend.prob_calls == [8]  # both orders of 4 leaves
    assert all(o.source == "fallback" and o.values == (1.0, -1.0) for o in tree.outcomes.values())


def first_named(chat) -> str:
    """The debater the judge question names first ("..., Amara or Bruno?")."""
    return chat[-1]["content"].rsplit("convincingly, ", 1)[1].split(" or ")[0]


def test_a_judge_that_names_the_first_side_favours_neither_seat():
    # regression: the sides were always named seat 0 first, and the embedded judge named seat 0
    def script(chat):
        if chat[0]["content"].startswith("You judge"):
            return f"WINNER: {first_named(chat)}"
        return "A point."

    tree = debate_tree(ScriptedBackend(script))
    stats = expand([tree])
    assert stats.judged == 4
    # each seat wins one of the two orders: a win share of 0.5 each, a payoff of 0 each
    assert {o.values for o in tree.outcomes.values()} == {(0.0, 0.0)}
    assert all(o.judge_text.count("WINNER:") == 2 for o in tree.outcomes.values())


def test_judge_questions_come_after_worked_examples_in_both_orders():
    domain = get_domain("debate")
    scenario = domain.scenario(3)
    a, b = scenario.names
    chats = domain.judge_chats(scenario, (scenario.opening, "A reply.", "Another."))
    assert [first_named(c) for c in chats] == [a, b]
    for chat in chats:
        roles = [m["role"] for m in chat]
        assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
        assert [m["content"].splitlines()[-1] for m in chat[2:5:2]] == [
            "WINNER: Kim",
            "WINNER: Pat",
        ]
    for name in ("meeting", "fruit"):
        domain = get_domain(name)
        scenario = domain.scenario(0)
        chats = domain.judge_chats(scenario, (scenario.opening, "Fine."))
        assert len(chats) == 2 and all(len(c) == 8 for c in chats)  # three worked examples
        assert all(c[2]["content"].splitlines()[-1].startswith("VALUE: ") for c in chats)


def test_a_fallback_asks_only_the_order_that_did_not_parse():
    tree = debate_tree(debate_backend("placeholder"))
    a, b = tree.scenario.names

    def script(chat):
        if chat[0]["content"].startswith("You judge"):
            return f"WINNER: {b}" if first_named(chat) == a else "no idea"
        return "A logical point." if "logos" in chat[-1]["content"] else "Think of the children."

    backend = ScriptedBackend(script, probs=lambda chat, cs: {a: 0.9, b: 0.1})
    tree = debate_tree(backend)
    stats = expand([tree])
    assert stats.judge_fallbacks == 4 and backend.prob_calls == [4]  # one order per leaf
    assert {o.values for o in tree.outcomes.values()} == {(0.0, 0.0)}  # b once, a once
    assert all(o.judge_text.endswith(f"[fallback: {a}]") for o in tree.outcomes.values())
