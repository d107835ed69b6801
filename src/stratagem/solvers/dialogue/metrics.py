"""Metrics of solver-steered dialogue (seed 003 §4, Table 1, App. B and C; SPEC §9).

- ``cfr_gain``: both players play ``any`` (the baseline LLM); how much does one player gain by
  switching to the CFR policy? Per player, on one scenario's tree; ``summarize`` averages it
  over players and scenarios and gives its spread over scenarios (seed 003 Table 1).
- NashConv of the CFR profile: ``solvers.best_response.nash_conv`` on the same tree.
- ``steering_accuracy``: does a message follow its instruction? A classifier LLM is asked which
  instruction the message reflects, with every instruction's definition (seed 003 App. B);
  accuracy per instruction and overall, next to chance (1 / the number of labels). Where the
  domain's structured line can tell (meeting: the day proposed), the exact rate is given too.
- ``judge_accuracy``: the LLM judge against exact payoffs on templated two-message dialogues of
  three outcome types, valid / rejected / incomplete (seed 003 App. C, Table 8): Norm = mean
  |judged − true| / payoff range, Sgn = the rate at which the judged payoff's sign (−, 0, +)
  differs from the true one. An answer with no number is a failure, counted apart and left out
  of Norm and Sgn (never scored as 0).

These metrics need live trees and a backend (they ask the classifier and the judge), unlike the
trace metrics elsewhere in this package; the numbers they return are plain dataclasses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stratagem.backends.base import Sampling
from stratagem.backends.cache import CachedBackend
from stratagem.games.dialogue.base import ANY, OUTCOMES, Domain, last_number
from stratagem.metrics.estimate import Estimate, mean_estimate
from stratagem.seeding import derive
from stratagem.solvers.best_response import nash_conv
from stratagem.solvers.dialogue import JUDGE_SAMPLING, DialogueTree, fixed_policy
from stratagem.solvers.tree import expected_returns
from stratagem.tree import Node, Policy, infosets


def cfr_gain(root: Node, policy: Policy, baseline: str = ANY) -> tuple[float, float]:
    """Returns each player's gain from switching alone from ``baseline`` (every information set
    plays it) to ``policy``, the other player staying on ``baseline``."""
    base_policy = fixed_policy(root, baseline)
    base = expected_returns(root, base_policy)
    owners = {key: owner for key, (owner, _) in infosets(root).items()}
    gains = []
    for player in (0, 1):
        mixed = {k: policy[k] if o == player else base_policy[k] for k, o in owners.items()}
        gains.append(expected_returns(root, mixed)[player] - base[player])
    return gains[0], gains[1]


@dataclass(frozen=True)
class ScenarioMetrics:
    """CFR Gain and NashConv of one scenario's tree, with the values they compare."""

    scenario: str
    cfr_gain: tuple[float, float]  # per player
    nash_conv: float
    value_any: tuple[float, float]  # both play the baseline
    value_cfr: tuple[float, float]  # both play the CFR policy

    @property
    def mean_gain(self) -> float:
        """CFR Gain averaged over the two players."""
        return (self.cfr_gain[0] + self.cfr_gain[1]) / 2


def scenario_metrics(scenario: str, root: Node, policy: Policy) -> ScenarioMetrics:
    """Returns the CFR Gain and NashConv of ``policy`` on ``root``."""
    return ScenarioMetrics(
        scenario=scenario,
        cfr_gain=cfr_gain(root, policy),
        nash_conv=nash_conv(root, policy),
        value_any=expected_returns(root, fixed_policy(root, ANY)),
        value_cfr=expected_returns(root, policy),
    )


@dataclass(frozen=True)
class Spread:
    """A mean over scenarios with its standard deviation and standard error."""

    mean: float
    std: float
    stderr: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.3f} ± {self.std:.3f}"


def spread(xs: Sequence[float]) -> Spread:
    """The mean of ``xs`` with its sample standard deviation (0 for one value) and stderr."""
    est = mean_estimate(list(xs))
    return Spread(est.value, est.stderr * math.sqrt(est.n), est.stderr, est.n)


def summarize(results: Sequence[ScenarioMetrics]) -> dict[str, Spread]:
    """CFR Gain (averaged over players) and NashConv over scenarios, each with its spread."""
    return {
        "cfr_gain": spread([r.mean_gain for r in results]),
        "nash_conv": spread([r.nash_conv for r in results]),
    }


@dataclass(frozen=True)
class SteeringReport:
    """Steering accuracy per instruction and overall (seed 003 Tables 2–5)."""

    domain: str
    labels: tuple[str, ...]
    per_instruction: Mapping[str, Estimate]
    overall: Estimate
    chance: float  # accuracy of a random label
    fallbacks: int  # answers read by the constrained fallback
    failures: int  # answers that named no label (counted wrong)
    exact: Mapping[str, Estimate] | None  # from the structured line, where it tells

    def rows(self) -> list[dict[str, object]]:
        """One row per instruction, then "overall"."""
        out: list[dict[str, object]] = []
        for name, est in [*self.per_instruction.items(), ("overall", self.overall)]:
            row: dict[str, object] = {"instruction": name, "accuracy": est.value, "n": est.n}
            if self.exact is not None:
                exact = self.exact.get(name)
                row["exact"] = exact.value if exact else None
            out.append(row)
        return out


def steering_samples(
    trees: Sequence[DialogueTree], limit: int | None = None
) -> list[tuple[DialogueTree, tuple[str, ...], str]]:
    """Every generated message of ``trees`` written under an instruction other than ``any``, as
    (tree, dialogue ending with that message, instruction); at most ``limit`` per instruction,
    taken in tree order."""
    out: list[tuple[DialogueTree, tuple[str, ...], str]] = []
    counts: dict[str, int] = {}
    for tree in trees:
        for branch, messages in tree.history.items():
            if not branch or branch[-1][0] == ANY:
                continue
            instruction = branch[-1][0]
            if limit is not None and counts.get(instruction, 0) >= limit:
                continue
            counts[instruction] = counts.get(instruction, 0) + 1
            out.append((tree, messages, instruction))
    return out


def steering_accuracy(
    domain: Domain,
    samples: Sequence[tuple[DialogueTree, tuple[str, ...], str]],
    backend: CachedBackend,
    *,
    labels: Sequence[str] | None = None,
    sampling: Sampling = Sampling(0.0, 1.0, 8),
    fallback: bool = True,
) -> SteeringReport:
    """Asks the classifier, in one batch, which label each sample's message reflects; an
    answer naming no single label goes to the constrained choice (``fallback``) or counts as
    wrong. ``labels``: the classifier's choices (default: the samples' instructions)."""
    labels = tuple(labels or dict.fromkeys(s[2] for s in samples))
    chats = [domain.classifier_chat(messages[-1], labels) for _, messages, _ in samples]
    seeds = [derive(0, "classify", i) for i in range(len(chats))]
    gens = backend.generate(chats, sampling, seeds=seeds) if chats else []
    picks = [domain.parse_label(g.text, labels) for g in gens]
    missing = [i for i, p in enumerate(picks) if p is None]
    fallbacks = 0
    if missing and fallback:
        dists = backend.choice_probs([chats[i] for i in missing], [labels] * len(missing))
        for i, dist in zip(missing, dists, strict=True):
            picks[i] = max(labels, key=lambda c: dist.get(c, 0.0))
        fallbacks = len(missing)
    hits: dict[str, list[float]] = {label: [] for label in dict.fromkeys(s[2] for s in samples)}
    exact: dict[str, list[float]] = {k: [] for k in hits}
    for (tree, messages, instruction), pick in zip(samples, picks, strict=True):
        hits[instruction].append(float(pick == instruction))
        follows = domain.follows(tree.scenario, messages, instruction)
        if follows is not None:
            exact[instruction].append(float(follows))
    every = [x for xs in hits.values() for x in xs]
    any_exact = any(exact.values())
    return SteeringReport(
        domain=domain.name,
        labels=labels,
        per_instruction={k: mean_estimate(v) for k, v in hits.items()},
        overall=mean_estimate(every),
        chance=1 / len(labels) if labels else 0.0,
        fallbacks=fallbacks,
        failures=len(missing) if not fallback else 0,
        exact=(
            {
                **{k: mean_estimate(v) for k, v in exact.items()},
                "overall": mean_estimate([x for xs in exact.values() for x in xs]),
            }
            if any_exact
            else None
        ),
    )


@dataclass(frozen=True)
class JudgeRow:
    """Judge errors on one outcome type (or all): Norm, Sgn, answers scored, failures."""

    outcome: str
    norm: float
    sgn: float
    n: int
    failures: int


def judge_accuracy(
    domain: Domain,
    backend: CachedBackend,
    *,
    per_outcome: int = 10,
    seed: int = 0,
    sampling: Sampling = JUDGE_SAMPLING,
) -> list[JudgeRow]:
    """Scores ``per_outcome`` templated dialogues of each outcome type with the judge (both
    seats each, so 2 answers per dialogue, all in one batch) against their exact payoffs;
    returns one row per outcome type, then "all"."""
    cases = []
    for outcome in OUTCOMES:
        for i in range(per_outcome):
            scenario, messages = domain.templated(derive(seed, "judge", outcome, i), outcome)
            exact = domain.exact_payoff(scenario, messages, outcome)
            for seat, chat in enumerate(domain.judge_chats(scenario, messages)):
                cases.append((outcome, exact[seat], chat))
    seeds = [derive(seed, "judge-answer", i) for i in range(len(cases))]
    gens = backend.generate([c[2] for c in cases], sampling, seeds=seeds)
    lo, hi = domain.payoff_range
    errors: dict[str, list[tuple[float, float]]] = {o: [] for o in OUTCOMES}
    failures = dict.fromkeys(OUTCOMES, 0)
    for (outcome, truth, _), gen in zip(cases, gens, strict=True):
        value = last_number(gen.text)
        if value is None:
            failures[outcome] += 1
            continue
        errors[outcome].append(
            (abs(value - truth) / (hi - lo), float(_sign(value) != _sign(truth)))
        )
    rows = [_row(o, errors[o], failures[o]) for o in OUTCOMES]
    every = [e for o in OUTCOMES for e in errors[o]]
    return [*rows, _row("all", every, sum(failures.values()))]


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _row(outcome: str, errors: list[tuple[float, float]], failures: int) -> JudgeRow:
    n = len(errors)
    norm = sum(e[0] for e in errors) / n if n else math.nan
    sgn = sum(e[1] for e in errors) / n if n else math.nan
    return JudgeRow(outcome, norm, sgn, n, failures)
