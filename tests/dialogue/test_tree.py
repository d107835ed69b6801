"""Dialogue trees on the scripted backend: a two-reply meeting game computed by hand.

The game (``hand_scenario``, ``meeting_script``): Alice (seat 0) opened with PROPOSE: Monday.
Bob (seat 1) replies under Monday (accepts Monday), Tuesday (proposes Tuesday) or any (seed 0
accepts Monday, seed 1 proposes Tuesday). After a Tuesday proposal Alice replies under Monday
or any (proposes Monday again: no agreement at the reply limit) or Tuesday (accepts Tuesday).
Values: Alice Monday 8, Tuesday 4; Bob Monday 2, Tuesday 6.

    baseline (any, any):   Bob any → ½ (8, 2) + ½ Alice any → (0, 0)      = (4, 1)
    equilibrium:           Bob Tuesday, Alice Tuesday                       = (4, 6)
    Bob switches alone:    Tuesday, then Alice any → (0, 0): gain 0 − 1     = −1
    Alice switches alone:  ½ (8, 2) + ½ Tuesday accepted (4, 6): 6 − 4      = +2
    CFR Gain = (−1 + 2) / 2 = 0.5;  NashConv(equilibrium) = 0
    NashConv(baseline): Bob's best reply Monday → 2 (gain 1); Alice's Tuesday → 6 (gain 2) = 3
"""

from __future__ import annotations

import pytest

from stratagem.backends.base import Sampling
from stratagem.backends.cache import CachedBackend, ResponseCache
from stratagem.backends.scripted import ScriptedBackend
from stratagem.games.dialogue import get_domain
from stratagem.solvers.best_response import nash_conv
from stratagem.solvers.cfr import solve
from stratagem.solvers.dialogue import DialogueTree, expand, fixed_policy
from stratagem.solvers.dialogue.metrics import cfr_gain, scenario_metrics, summarize
from stratagem.solvers.tree import flatten
from stratagem.tree import CHANCE, TERMINAL, Node, walk

from .conftest import SeededScript, meeting_script

DAYS = ("Monday", "Tuesday", "any")


def hand_tree(scenario, backend, **kwargs) -> DialogueTree:
    domain = get_domain("meeting", DAYS)
    return DialogueTree(domain, scenario, backend, replies=2, seeds=2, **kwargs)


def equilibrium(root: Node) -> dict[str, dict[str, float]]:
    return fixed_policy(root, "Tuesday")


def test_tree_matches_the_hand_drawn_one(hand_scenario):
    backend = SeededScript(meeting_script)
    tree = hand_tree(hand_scenario, CachedBackend(backend))
    stats = expand([tree])
    # 1 + 3 decisions (Bob; Alice after each Tuesday proposal), 3 + 9 chance nodes, 21 leaves
    assert (stats.decision, stats.chance, stats.terminal, stats.nodes) == (4, 12, 21, 37)
    assert stats.messages == 6 + 18 and stats.infosets == 2 and stats.structured == 24
    # Alice's three decision nodes hold the same dialogue: one information set, and the
    # cache writes each (history, instruction, seed) once: 6 messages at depth 1, not 18
    assert backend.calls == [6, 6] and stats.model_calls == 2 and stats.generated == 12
    root = tree.root
    assert isinstance(root, Node) and root.player == 1 and root.actions() == DAYS
    chance = root.child("any")
    assert chance.player == CHANCE and chance.chances() == (0.5, 0.5)
    assert chance.child("seed0").player == TERMINAL
    assert chance.child("seed0").returns() == (8.0, 2.0)
    alice = chance.child("seed1")
    assert alice.player == 0 and alice.infoset() == root.child("Tuesday").child("seed0").infoset()
    assert alice.child("Tuesday").child("seed1").returns() == (4.0, 6.0)
    assert alice.child("any").child("seed0").returns() == (0.0, 0.0)
    with pytest.raises(KeyError):
        root.child("Friday")


def test_cfr_policy_gain_and_nash_conv_by_hand(hand_scenario):
    tree = hand_tree(hand_scenario, CachedBackend(SeededScript(meeting_script)))
    root = tree.root
    exact = equilibrium(root)
    assert cfr_gain(root, exact) == (2.0, -1.0)
    assert nash_conv(root, exact) == 0.0
    assert nash_conv(root, fixed_policy(root, "any")) == pytest.approx(3.0)
    solution = solve(root, "cfr+", 2000)
    for dist in solution.policy.values():
        assert dist["Tuesday"] == pytest.approx(1.0, abs=1e-3)
    metrics = scenario_metrics("hand", root, solution.policy)
    assert metrics.cfr_gain == pytest.approx((2.0, -1.0), abs=1e-3)
    assert metrics.mean_gain == pytest.approx(0.5, abs=1e-3)
    assert metrics.nash_conv == pytest.approx(0.0, abs=1e-3)
    assert metrics.value_any == (4.0, 1.0)
    assert metrics.value_cfr == pytest.approx((4.0, 6.0), abs=1e-3)
    summary = summarize([metrics, metrics])
    assert summary["cfr_gain"].mean == pytest.approx(0.5, abs=1e-3)
    assert summary["cfr_gain"].std == pytest.approx(0.0) and summary["cfr_gain"].n == 2


def test_a_mutated_payoff_fails_the_hand_numbers(hand_scenario):
    # the check above is not vacuous: Alice valuing Tuesday at 1 changes her gain
    domain = get_domain("meeting", DAYS)
    tree = DialogueTree(domain, hand_scenario, CachedBackend(SeededScript(meeting_script)))
    hand_scenario.private[0].values["Tuesday"] = 1  # a fresh fixture per test
    assert cfr_gain(tree.root, equilibrium(tree.root)) != (2.0, -1.0)


def test_second_solve_with_the_cache_calls_the_backend_zero_times(hand_scenario, tmp_path):
    first = SeededScript(meeting_script)
    cache = tmp_path / "responses.sqlite"
    tree = hand_tree(hand_scenario, CachedBackend(first, cache))
    one = solve(tree.root, "cfr", 50)
    assert first.calls == [6, 6]

    def refuse(chat):
        raise AssertionError("the backend must not be called on a warm cache")

    second = ScriptedBackend(refuse)
    again = hand_tree(hand_scenario, CachedBackend(second, ResponseCache(cache)))
    stats = expand([again])
    assert second.calls == [] and stats.model_calls == 0 and stats.cache_hits == 24
    assert solve(again.root, "cfr", 50).policy == one.policy


def test_lazy_tree_generates_one_depth_per_call(hand_scenario):
    backend = SeededScript(meeting_script)
    tree = hand_tree(hand_scenario, CachedBackend(backend))
    assert backend.calls == []  # nothing is generated before a child is asked for
    tree.root.child("Monday").child("seed0")
    assert backend.calls == [6]  # the whole of depth 0, one call
    flat = flatten(tree.root)
    assert backend.calls == [6, 6] and flat.n_nodes == 37


def test_expansion_issues_one_backend_call_per_depth_for_many_trees():
    domain = get_domain("fruit", ("calm", "assertive", "any"))
    scenarios = [domain.scenario(s) for s in range(3)]
    # nobody ever settles: every dialogue runs to the reply limit
    backend = ScriptedBackend(lambda chat: "Let me think about it.")
    cached = CachedBackend(backend)
    trees = [DialogueTree(domain, s, cached, replies=3, seeds=2) for s in scenarios]
    stats = expand(trees)
    per_tree = [6, 36, 216]  # (3 instructions × 2 seeds) ** depth frontier × 6
    assert len(backend.calls) == 3 and stats.model_calls == 3
    assert backend.calls[0] == 3 * per_tree[0]
    assert stats.messages == 3 * sum(per_tree) and stats.terminal == 3 * 216
    assert stats.batches == tuple(backend.calls)
    assert all(t.outcomes[p].values == (0.0, 0.0) for t in trees for p in t.outcomes)


def test_greedy_sampling_shares_one_message_across_seeds(hand_scenario):
    backend = SeededScript(meeting_script)
    tree = hand_tree(hand_scenario, CachedBackend(backend), sampling=Sampling(0.0, 1.0, 48))
    expand([tree])
    # greedy text cannot depend on the seed: one message per (history, instruction)
    assert backend.calls == [3, 3]


def test_message_is_a_pure_function_of_history_instruction_and_seed(hand_scenario):
    seen = []

    def script(chat, j):
        seen.append((tuple(m["content"] for m in chat), j))
        return meeting_script(chat, j)

    tree = hand_tree(hand_scenario, CachedBackend(SeededScript(script)))
    expand([tree])
    assert len(seen) == len(set(seen))  # no (chat, seed) is ever generated twice


def test_walk_reaches_every_leaf_with_a_payoff(hand_scenario):
    tree = hand_tree(hand_scenario, CachedBackend(SeededScript(meeting_script)))
    leaves = [n for n in walk(tree.root) if n.player == TERMINAL]
    assert len(leaves) == 21
    assert {n.returns() for n in leaves} == {(8.0, 2.0), (4.0, 6.0), (0.0, 0.0)}
    rows = list(tree.dialogues())
    assert len(rows) == 21 and rows[0]["source"] == "exact"
