"""Breadth-first expansion of many dialogue trees at once, and what it cost.

``expand`` runs one backend call per depth for the whole frontier of every tree, then one call
for the judge; ``ExpansionStats`` reports tree sizes, model calls, cache hits, judge results and
failed generations; ``failed_scenarios`` names the trees that cannot be solved, and why.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from stratagem.backends.cache import Usage
from stratagem.errors import StratagemError
from stratagem.solvers.dialogue.tree import DialogueTree, depth_round, judge_pending


@dataclass(frozen=True)
class ExpansionStats:
    """What an expansion cost: tree sizes, model calls, cache hits, judge results, seconds."""

    trees: int
    nodes: int
    decision: int
    chance: int
    terminal: int
    messages: int
    infosets: int
    model_calls: int  # backend calls (message depths and judge rounds that missed the cache)
    generated: int  # completions the backend computed
    cache_hits: int
    tokens: int
    structured: int  # messages holding a structured line
    judged: int  # dialogues scored by the judge (parsed answers)
    judge_fallbacks: int
    judge_failures: int
    seconds: float
    batches: tuple[int, ...]  # size of each backend call, in order
    generation_failures: int = 0  # dialogues ended by a failed generation (message or judge)


def expand(trees: Sequence[DialogueTree]) -> ExpansionStats:
    """Expands ``trees`` breadth first, one backend call per depth for all their frontiers, then
    judges their finished dialogues in one more call; returns what it cost.

    All trees must share one backend, sampling and domain (that is what one call can serve).
    """
    if not trees:
        raise ValueError("expand needs at least one tree")
    first = trees[0]
    for tree in trees:
        if (tree.backend, tree.sampling, tree.domain.name) != (
            first.backend,
            first.sampling,
            first.domain.name,
        ):
            raise ValueError("trees expanded together must share backend, sampling and domain")
    before = first.backend.usage.snapshot()
    start = time.perf_counter()
    for d in range(max(t.replies for t in trees)):
        depth_round(trees, d)
    judge_pending(trees)
    seconds = time.perf_counter() - start
    return stats(trees, first.backend.usage.since(before), seconds)


def stats(trees: Sequence[DialogueTree], usage: Usage, seconds: float) -> ExpansionStats:
    """The ``ExpansionStats`` of ``trees`` after a backend ``usage``."""
    sizes = [t.nodes() for t in trees]
    total = {
        k: sum(s[k] for s in sizes)
        for k in ("nodes", "decision", "chance", "terminal", "messages", "infosets")
    }
    sources = [o.source for t in trees for o in t.outcomes.values()]
    return ExpansionStats(
        trees=len(trees),
        **total,
        model_calls=usage.calls,
        generated=usage.generated,
        cache_hits=usage.hits,
        tokens=usage.tokens,
        structured=sum(t.structured for t in trees),
        judged=sources.count("judge"),
        judge_fallbacks=sources.count("fallback"),
        judge_failures=sources.count("failed"),
        seconds=seconds,
        batches=tuple(usage.batches),
        generation_failures=sources.count("error"),
    )


def failed_scenarios(trees: Sequence[DialogueTree]) -> dict[str, str]:
    """Each scenario whose tree holds a dialogue without a payoff, with the first reason and
    how many such dialogues it holds (empty when every tree can be solved)."""
    out = {}
    for tree in trees:
        reasons = list(tree.failures().values())
        if reasons:
            more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
            out[tree.scenario.id] = f"{reasons[0]}{more}"
    return out


class UnsolvedScenarios(StratagemError, RuntimeError):
    """Some scenarios' trees hold dialogues without a payoff (a failed generation, or a judge
    answer that did not parse); the message names them and why."""

    exit_code = 1


def unsolved_message(failures: dict[str, str], total: int) -> str:
    """One line naming each failed scenario and its reason, and how to retry."""
    named = "; ".join(f"{sid}: {why}" for sid, why in failures.items())
    return (
        f"{len(failures)} of {total} scenarios have dialogues without a payoff: {named}. "
        "Failed generations are not cached: run the same command again to retry them"
    )


def check_solvable(trees: Sequence[DialogueTree]) -> None:
    """Raises ``UnsolvedScenarios`` naming every scenario of ``trees`` that cannot be solved."""
    failures = failed_scenarios(trees)
    if failures:
        raise UnsolvedScenarios(unsolved_message(failures, len(trees)))
