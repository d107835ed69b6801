"""Deal or No Deal metrics (SPEC §7; seed 002 §5–6), computed from traces only.

The evaluated agent sits in ``trace.meta["seat"]`` (0 by default); with ``both_seats=True`` (self-
play) each episode counts both seats, averaged within the episode so episodes stay the unit of
the standard error. Error and timeout traces are skipped; every rate and mean is over complete
episodes (or, for the correction rate, over the agent's answers).

- ``score`` / ``opponent_score``: the objective ``R_i + λ·R_j`` of the agent and of the other
  seat; ``item_score`` / ``opponent_item_score``: the raw item scores ``R_i``.
- ``agreement_rate``: episodes whose proposals were complementary.
- ``pareto_rate``: episodes ending in a Pareto-optimal agreement, among all episodes (no
  agreement is never Pareto-optimal: every item is worth something to someone);
  ``pareto_rate_agreed``: the same among agreements only. Pareto optimality is judged on the raw
  item scores, each seat's with *its own* values: no other division gives both seats at least as
  much and one of them more.
- ``joint_best_rate``: episodes ending in an agreement of the highest joint value (both seats'
  item scores added, each with its own values), among all episodes: the division λ = 1 rewards,
  which a Pareto-optimal one need not be.
- ``dialogue_turns``, ``dialogue_words``, ``dialogue_tokens``: per episode, the accepted turns,
  their words (message texts and written proposals, both seats, prefixes left out) and the model
  tokens generated for them (``DecisionRecord.tokens`` of accepted answers; rule-based seats
  generate none).
- ``first_speaker_share``: the item score of the seat that spoke first over its value of the
  whole pool (0 without an agreement): how much of what it values the opener keeps.
- ``vocabulary_size``: distinct lower-cased words in the agent's messages over all the episodes
  given (one iteration's games, SPEC §7); its error is the jackknife over episodes.
- ``correction_rate``: the agent's answers refused with a correction, over all its answers.
- ``abort_rate``: episodes aborted after five consecutive refused answers.

Departure: seed 002 counts vocabulary and dialogue length in model tokens; without a tokenizer at
hand the vocabulary is counted in words (``dialogue_tokens`` still reads the model's counts).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from stratagem.games.dond import Items, complement, divisions, joint_values, score
from stratagem.metrics.estimate import Estimate, mean_estimate
from stratagem.metrics.registry import GAME_METRICS
from stratagem.trace import Trace

_WORD = re.compile(r"[a-z0-9']+")


def pareto_optimal(counts: Items, values: Sequence[Items], share0: Items) -> bool:
    """Whether seat 0 keeping ``share0`` (seat 1 the rest) is Pareto-optimal: no division gives
    both seats at least their item scores and one of them more, each seat scored with its own
    values (``values[0]`` for seat 0, ``values[1]`` for seat 1)."""
    r0 = score(values[0], share0)
    r1 = score(values[1], complement(counts, share0))
    for other in divisions(counts):
        s0, s1 = score(values[0], other), score(values[1], complement(counts, other))
        if s0 >= r0 and s1 >= r1 and (s0 > r0 or s1 > r1):
            return False
    return True


def _result(trace: Trace) -> Any:
    return trace.rounds[-1]


def _counts(info: dict[str, Any]) -> Items:
    return tuple(info["counts"])


def _values(info: dict[str, Any]) -> tuple[Items, Items]:
    return tuple(info["values"][0]), tuple(info["values"][1])


def is_pareto(trace: Trace) -> bool:
    """Whether the episode ended in a Pareto-optimal agreement."""
    info = _result(trace).info
    if not info["agreement"]:
        return False
    return pareto_optimal(_counts(info), _values(info), tuple(info["proposals"][0]))


def is_joint_best(trace: Trace) -> bool:
    """Whether the episode ended in an agreement of the highest joint value."""
    info = _result(trace).info
    if not info["agreement"]:
        return False
    joint = joint_values(_counts(info), _values(info))
    return joint[tuple(info["proposals"][0])] == max(joint.values())


def complete(traces: Sequence[Trace]) -> list[Trace]:
    """Returns the complete traces that hold a finished dialogue."""
    return [t for t in traces if t.status == "complete" and t.rounds]


def seats_of(trace: Trace, both_seats: bool = False) -> tuple[int, ...]:
    """Returns the seats an episode counts for: the agent's (``meta["seat"]``, 0 by default), or
    both."""
    return (0, 1) if both_seats else (int(trace.meta.get("seat", 0)),)


def _per_seat(
    traces: Sequence[Trace], both_seats: bool, value: Callable[[Trace, int], float]
) -> Estimate:
    """Mean over episodes of ``value(trace, seat)`` averaged over the counted seats."""
    xs = []
    for t in complete(traces):
        seats = seats_of(t, both_seats)
        xs.append(math.fsum(value(t, s) for s in seats) / len(seats))
    return mean_estimate(xs)


def _per_episode(traces: Sequence[Trace], value: Callable[[Trace], float]) -> Estimate:
    return mean_estimate([value(t) for t in complete(traces)])


def scores(traces: Sequence[Trace], both_seats: bool = False) -> dict[str, Estimate]:
    """Objective and raw item scores of the agent and of the other seat."""
    payoff = lambda t, s: _result(t).payoffs[s]  # noqa: E731
    items = lambda t, s: float(_result(t).info["item_scores"][s])  # noqa: E731
    return {
        "score": _per_seat(traces, both_seats, payoff),
        "opponent_score": _per_seat(traces, both_seats, lambda t, s: payoff(t, 1 - s)),
        "item_score": _per_seat(traces, both_seats, items),
        "opponent_item_score": _per_seat(traces, both_seats, lambda t, s: items(t, 1 - s)),
    }


def agreement_rate(traces: Sequence[Trace]) -> Estimate:
    """Share of episodes whose proposals were complementary."""
    return _per_episode(traces, lambda t: float(_result(t).info["agreement"]))


def pareto_rate(traces: Sequence[Trace]) -> Estimate:
    """Share of all episodes ending in a Pareto-optimal agreement."""
    return _per_episode(traces, lambda t: float(is_pareto(t)))


def pareto_rate_agreed(traces: Sequence[Trace]) -> Estimate:
    """Share of agreements that are Pareto-optimal."""
    agreed = [t for t in complete(traces) if _result(t).info["agreement"]]
    return mean_estimate([float(is_pareto(t)) for t in agreed])


def joint_best_rate(traces: Sequence[Trace]) -> Estimate:
    """Share of all episodes ending in an agreement of the highest joint value."""
    return _per_episode(traces, lambda t: float(is_joint_best(t)))


def first_speaker_share(traces: Sequence[Trace]) -> Estimate:
    """Mean over episodes of the first speaker's item score over its value of the whole pool
    (every context's pool is worth 10 > 0 to each seat)."""

    def share(t: Trace) -> float:
        info = _result(t).info
        first = int(info["first"])
        return info["item_scores"][first] / score(_values(info)[first], _counts(info))

    return _per_episode(traces, share)


def abort_rate(traces: Sequence[Trace]) -> Estimate:
    """Share of episodes aborted after five consecutive refused answers of one seat."""
    return _per_episode(traces, lambda t: float(_result(t).info["aborted"]))


def words(text: str) -> list[str]:
    """Returns the lower-cased words of ``text`` (letters, digits, apostrophes)."""
    return _WORD.findall(text.lower())


def accepted(trace: Trace) -> list[bool]:
    """For each decision of the trace, whether the game accepted it: an answer is refused when
    the same seat answers again after it (a higher ``attempt``), or when it ended an aborted
    episode."""
    ds = trace.decisions
    aborted = bool(_result(trace).info["aborted"]) if trace.rounds else False
    out = []
    for i, d in enumerate(ds):
        if i + 1 < len(ds):
            nxt = ds[i + 1]
            out.append(not (nxt.seat == d.seat and nxt.attempt > 0))
        else:
            out.append(not aborted)
    return out


def dialogue_lengths(traces: Sequence[Trace]) -> dict[str, Estimate]:
    """Mean accepted turns, words and generated model tokens per episode (both seats)."""
    turns = _per_episode(traces, lambda t: float(_result(t).info["turns"]))
    n_words = _per_episode(
        traces, lambda t: float(sum(len(words(x["text"])) for x in _result(t).info["dialogue"]))
    )
    tokens = _per_episode(
        traces,
        lambda t: float(
            sum(d.tokens for d, ok in zip(t.decisions, accepted(t), strict=True) if ok)
        ),
    )
    return {"dialogue_turns": turns, "dialogue_words": n_words, "dialogue_tokens": tokens}


def vocabulary_size(traces: Sequence[Trace], both_seats: bool = False) -> Estimate:
    """Distinct words in the counted seats' messages over all episodes, with its jackknife
    standard error (leave one episode out)."""
    per_episode = []
    for t in complete(traces):
        seats = seats_of(t, both_seats)
        vocab = set()
        for x in _result(t).info["dialogue"]:
            if x["seat"] in seats and x["kind"] == "message":
                vocab.update(words(x["text"]))
        per_episode.append(vocab)
    n = len(per_episode)
    if n == 0:
        return Estimate(0.0, 0.0, 0)
    # a word counts once overall; leaving an episode out loses the words only it used
    uses: dict[str, int] = defaultdict(int)
    for vocab in per_episode:
        for w in vocab:
            uses[w] += 1
    size = len(uses)
    if n < 2:
        return Estimate(float(size), 0.0, n)
    loo = [size - sum(1 for w in vocab if uses[w] == 1) for vocab in per_episode]
    mean = math.fsum(loo) / n
    stderr = math.sqrt((n - 1) / n * math.fsum((x - mean) ** 2 for x in loo))
    return Estimate(float(size), stderr, n)


def correction_rate(traces: Sequence[Trace], both_seats: bool = False) -> Estimate:
    """Share of the counted seats' answers that were refused with a correction."""
    refused: list[float] = []
    for t in complete(traces):
        seats = seats_of(t, both_seats)
        for d, ok in zip(t.decisions, accepted(t), strict=True):
            if d.seat in seats:
                refused.append(float(not ok))
    return mean_estimate(refused)


def dond_metrics(traces: Sequence[Trace], both_seats: bool = False) -> dict[str, Estimate]:
    """Every DoND metric of the module docstring, in table order.

    Args:
        traces: DoND episodes (the agent in ``meta["seat"]``).
        both_seats: count both seats of every episode as the agent's (self-play).
    """
    traces = sorted(traces, key=lambda t: t.episode_id)  # a resumed run: same metrics
    metrics = scores(traces, both_seats)
    metrics.update(
        {
            "agreement_rate": agreement_rate(traces),
            "pareto_rate": pareto_rate(traces),
            "pareto_rate_agreed": pareto_rate_agreed(traces),
            "joint_best_rate": joint_best_rate(traces),
        }
    )
    metrics.update(dialogue_lengths(traces))
    metrics["first_speaker_share"] = first_speaker_share(traces)
    metrics["vocabulary_size"] = vocabulary_size(traces, both_seats)
    metrics["correction_rate"] = correction_rate(traces, both_seats)
    metrics["abort_rate"] = abort_rate(traces)
    return metrics


def by_iteration(
    traces: Sequence[Trace], key: str = "iteration", both_seats: bool = False
) -> dict[Any, dict[str, Estimate]]:
    """Returns ``dond_metrics`` per value of ``trace.meta[key]`` (a self-play iteration), in
    order of first appearance; traces without the key are left out."""
    groups: dict[Any, list[Trace]] = {}
    for t in traces:
        if key in t.meta:
            groups.setdefault(t.meta[key], []).append(t)
    return {k: dond_metrics(group, both_seats) for k, group in groups.items()}


GAME_METRICS.register(dond_metrics, "dond")
