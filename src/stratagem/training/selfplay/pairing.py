"""Paired changes between two checkpoints' evaluation games (``selfplay-eval``): the games
matched by index and checked to be the same games (``game_id``: index, seed, context), then
``metrics.paired`` on the score (mean ± standard error, 95 % bootstrap interval) and on the
joint-best and agreement outcomes (exact McNemar); a checkpoint's row and the summary table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stratagem.games.dond.contexts import context_id
from stratagem.metrics.dond import complete, is_joint_best
from stratagem.metrics.estimate import Estimate
from stratagem.metrics.paired import (
    PairedBinary,
    PairedMean,
    check_paired,
    paired_binary,
    paired_mean,
)
from stratagem.trace import Trace


@dataclass(frozen=True)
class PairedChanges:
    """A checkpoint's paired changes from the first one's games, over the same games."""

    score: PairedMean
    joint_best: PairedBinary
    agreement: PairedBinary


@dataclass(frozen=True)
class CheckpointEvaluation:
    """One checkpoint's games of one phase: its metrics, its paired changes and how many of
    the phase's games were drawn again off the run's selection contexts."""

    checkpoint: int
    phase: str
    metrics: dict[str, Estimate]
    changes: PairedChanges | None  # from the first checkpoint; None for that one
    redrawn: int = 0

    @property
    def paired(self) -> Estimate | None:
        """The paired change of the score (mean ± standard error), None for the first."""
        return None if self.changes is None else self.changes.score.change

    def paired_text(self) -> str:
        """The paired change of the score as a table cell with its 95 % bootstrap interval:
        "+0.70 ± 0.62 [-0.50, +1.93]", or "—" for the first checkpoint."""
        return "—" if self.changes is None else str(self.changes.score)

    def joint_best_text(self) -> str:
        """The paired change of the joint-best rate with McNemar's discordant games and exact
        p: "+0.083 (18 vs 10, p 0.19)", or "—" for the first checkpoint."""
        return "—" if self.changes is None else str(self.changes.joint_best)

    def row(self) -> dict[str, Any]:
        """The JSON form: ``{name: [value, stderr, n]}``, the paired changes (``None`` for the
        first checkpoint) and ``redrawn_games``."""
        as_list = lambda e: [e.value, e.stderr, e.n]  # noqa: E731
        binary = lambda b: {  # noqa: E731
            "change": as_list(b.change),
            "mcnemar": {"gained": b.gained, "lost": b.lost, "p": b.p},
        }
        c = self.changes
        out: dict[str, Any] = {"checkpoint": self.checkpoint, "phase": self.phase}
        out["redrawn_games"] = self.redrawn
        out["paired_score_change"] = None if c is None else as_list(c.score.change)
        out["paired_score_bootstrap_95"] = None if c is None else [c.score.low, c.score.high]
        out["paired_joint_best"] = None if c is None else binary(c.joint_best)
        out["paired_agreement"] = None if c is None else binary(c.agreement)
        out.update({name: as_list(e) for name, e in self.metrics.items()})
        return out


def game_score(trace: Trace, phase: str) -> float:
    """The score a paired comparison compares: the self-play objective of both seats' mean, or
    the policy's seat's score against the fixed agent."""
    payoffs = trace.rounds[-1].payoffs
    return sum(payoffs) / 2 if phase == "selfplay" else payoffs[trace.meta["seat"]]


def game_id(trace: Trace) -> str:
    """What makes two evaluation games the same game: index, seed and context."""
    return f"#{trace.meta['index']} seed {trace.seed} context {context_id(trace.scenario)}"


def paired_games(
    before: Sequence[Trace], after: Sequence[Trace]
) -> tuple[list[Trace], list[Trace]]:
    """The complete games of ``before`` and ``after`` matched by their index (games that errored
    on either side left out), in index order.

    Raises:
        PairingError: a matched pair is not the same game (another seed or context: ``game_id``),
            naming the first.
    """
    first = {t.meta["index"]: t for t in complete(before)}
    second = {t.meta["index"]: t for t in complete(after)}
    common = sorted(set(first) & set(second))
    a, b = [first[k] for k in common], [second[k] for k in common]
    ids = [game_id(t) for t in a], [game_id(t) for t in b]
    check_paired(*ids, sides=("the first checkpoint's games", "the other's"))
    return a, b


def paired_change(before: Sequence[Trace], after: Sequence[Trace], phase: str) -> Estimate:
    """Mean ± standard error of ``after``'s score minus ``before``'s over ``paired_games``.

    Raises:
        PairingError: the two sides did not play the same games.
    """
    changes = paired_changes(before, after, phase)
    return Estimate(0.0, 0.0, 0) if changes is None else changes.score.change


def paired_changes(
    before: Sequence[Trace], after: Sequence[Trace], phase: str
) -> PairedChanges | None:
    """``after``'s changes from ``before`` over ``paired_games``: the score's (with its 95 %
    bootstrap interval, seed 0), the joint-best and agreement rates' (exact McNemar); None
    when no game is complete on both sides.

    Raises:
        PairingError: the two sides did not play the same games.
    """
    a, b = paired_games(before, after)
    if not a:
        return None
    agreed = lambda t: bool(t.rounds[-1].info["agreement"])  # noqa: E731
    return PairedChanges(
        score=paired_mean([game_score(t, phase) for t in a], [game_score(t, phase) for t in b]),
        joint_best=paired_binary([is_joint_best(t) for t in a], [is_joint_best(t) for t in b]),
        agreement=paired_binary([agreed(t) for t in a], [agreed(t) for t in b]),
    )


def summary_markdown(results: Sequence[CheckpointEvaluation], games: int) -> str:
    """One table row per checkpoint and phase: score, its paired change (± standard error,
    95 % bootstrap interval), agreement, Pareto and joint-best rates, the joint-best rate's
    paired change (McNemar), failed games; then a note with how many games of each phase were
    drawn again off the run's selection contexts."""
    lines = [
        "| phase | checkpoint | games | score | paired change [95 %] | agreement | Pareto "
        "| joint-best | joint-best, paired (gained vs lost, McNemar p) | no agreement |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        m = r.metrics
        failed = round(m["agreement_rate"].n * (1 - m["agreement_rate"].value))
        cells = [
            r.phase,
            str(r.checkpoint),
            str(m["agreement_rate"].n),
            _pm(m["score"]),
            r.paired_text(),
            _pm(m["agreement_rate"]),
            _pm(m["pareto_rate"]),
            _pm(m["joint_best_rate"]),
            r.joint_best_text(),
            str(failed),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    redrawn = {r.phase: r.redrawn for r in results}
    note = (
        f"\n{games} games per phase and checkpoint; paired: the same games (checked by seed and "
        "context), from the first row, with the 95 % paired bootstrap interval; joint-best "
        "paired: the change of its rate, games gained vs lost and the exact McNemar p. "
        "Re-drawn off the run's selection contexts: "
        + ", ".join(f"{phase} {n} of {games}" for phase, n in redrawn.items())
        + ".\n"
    )
    return "\n".join(lines) + "\n" + note


def _pm(e: Estimate) -> str:
    return f"{e.value:.2f} ± {e.stderr:.2f}" if math.isfinite(e.value) else "—"
