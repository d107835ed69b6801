"""What the evaluated agent played, per opponent: action rates, also conditioned on the
opponent's previous move.

An aggregate such as Exploit cannot tell a policy that defects only against defectors from one
that defects every round; the rates can. For each (pool, opponent) and each *context* —
``all`` decisions, the ``first`` one, and ``after X`` (the opponent's latest move before this
decision was X) — a row per action gives the share of the agent's decisions in that context
that played it.

A rate is the mean over episodes of each episode's share (episodes that had no decision in the
context do not count), so its standard error treats episodes as the independent units, as the
SEPO metrics do. Only complete traces count; of a decision answered again after a correction,
the last answer counts.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stratagem.metrics.sepo import seat_of
from stratagem.trace import DecisionRecord, Trace

FIRST, ALL = "first", "all"


@dataclass(frozen=True, slots=True)
class ActionRate:
    """The share of the agent's decisions in ``context`` against ``opponent`` that were
    ``action``: mean over ``episodes`` episodes (``decisions`` decisions in all) ± one
    standard error."""

    pool: str
    opponent: str
    context: str
    action: str
    rate: float
    stderr: float
    episodes: int
    decisions: int


def final_decisions(trace: Trace) -> list[DecisionRecord]:
    """The trace's decisions in order, without answers that were replaced after a correction."""
    records = list(trace.decisions)
    return [
        d
        for i, d in enumerate(records)
        if not any(
            e.seat == d.seat and e.round == d.round and e.attempt > d.attempt
            for e in records[i + 1 :]
        )
    ]


def contexts_of(trace: Trace) -> list[tuple[str, str]]:
    """``(context, action)`` for each of the evaluated seat's decisions: its ``first``, or
    ``after X`` for the opponent's latest move X (nothing when the opponent has not moved)."""
    seat = seat_of(trace)
    last_other: str | None = None
    played: list[tuple[str, str]] = []
    for d in final_decisions(trace):
        if d.seat != seat:
            last_other = d.action
            continue
        if not played:
            played.append((FIRST, d.action))
        if last_other is not None:
            played.append((f"after {last_other}", d.action))
        played.append((ALL, d.action))
    return played


def action_rates(traces: Iterable[Trace]) -> list[ActionRate]:
    """Returns the rate of every action the agent played, per (pool, opponent, context), sorted
    by pool, opponent, context (``all``, ``first``, then ``after …``) and action.

    Every action the agent played anywhere has a row in every context (rate 0 where it was
    not played), so a policy that never defects against cooperators shows it.
    """
    # (pool, opponent) -> context -> list of per-episode {action: count}
    counts: dict[tuple[str, str], dict[str, list[dict[str, int]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    actions: set[str] = set()
    for trace in traces:
        if trace.status != "complete":
            continue
        key = (str(trace.meta.get("pool", "")), str(trace.meta.get("opponent", "")))
        per_context: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for context, action in contexts_of(trace):
            per_context[context][action] += 1
            actions.add(action)
        for context, tally in per_context.items():
            counts[key][context].append(tally)
    rows = []
    for key in sorted(counts):
        for context in sorted(counts[key], key=_context_order):
            episodes = counts[key][context]
            for action in sorted(actions):
                shares = [t.get(action, 0) / sum(t.values()) for t in episodes]
                rows.append(
                    ActionRate(
                        *key,
                        context,
                        action,
                        statistics.fmean(shares),
                        _stderr(shares),
                        len(episodes),
                        sum(sum(t.values()) for t in episodes),
                    )
                )
    return rows


def rate(rows: Sequence[ActionRate], opponent: str, action: str, context: str = ALL) -> float:
    """The rate of ``action`` against ``opponent`` in ``context`` (NaN when it has no row)."""
    found = [
        r.rate for r in rows if (r.opponent, r.action, r.context) == (opponent, action, context)
    ]
    return found[0] if found else float("nan")


def _context_order(context: str) -> tuple[int, str]:
    return ({ALL: 0, FIRST: 1}.get(context, 2), context)


def _stderr(values: Sequence[float]) -> float:
    return statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
