"""Filtered-BC self-play's evaluation rows and run-folder reports (SPEC §7): the ``metrics.dond``
row of each iteration, ``iterations.md`` and ``curves.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stratagem.metrics.dond import dond_metrics, scores
from stratagem.trace import Trace
from stratagem.training.checkpoints import TrainerState


def evaluation_row(
    iteration: int,
    selfplay: list[Trace],
    fixed: list[Trace],
    select: list[Trace] | None = None,
    select_both_seats: bool = True,
) -> dict[str, Any]:
    """The state's evaluation row of ``iteration``: every ``metrics.dond`` metric of the
    self-play games (both seats counted), prefixed ``selfplay_``, and of the games against the
    fixed agent (the policy's seat), prefixed ``fixed_``; with ``select``, the selection games'
    score (both seats counted with ``select_both_seats``, else the policy's) as ``select_score``
    and their errors as ``select_errors``."""
    row: dict[str, Any] = {"step": iteration}
    for prefix, traces, both in (("selfplay", selfplay, True), ("fixed", fixed, False)):
        for name, e in dond_metrics(traces, both_seats=both).items():
            row[f"{prefix}_{name}"] = {"value": e.value, "stderr": e.stderr, "n": e.n}
        row[f"{prefix}_errors"] = sum(t.status != "complete" for t in traces)
    if select is not None:
        e = scores(select, both_seats=select_both_seats)["score"]
        row["select_score"] = {"value": e.value, "stderr": e.stderr, "n": e.n}
        row["select_errors"] = sum(t.status != "complete" for t in select)
    return row


CURVES = (
    ("score", "objective score"),
    ("agreement_rate", "agreement rate"),
    ("pareto_rate", "Pareto-optimal rate"),
    ("dialogue_words", "dialogue length (words)"),
    ("vocabulary_size", "vocabulary (distinct words)"),
)


def write_reports(out: Path, state: TrainerState, opponent: str) -> None:
    """``iterations.md`` (one row per iteration) and ``curves.png`` (score, agreement, Pareto
    rate, length and vocabulary per iteration, in self-play and against the fixed agent, ± one
    standard error)."""
    if not state.evals:
        return
    (out / "iterations.md").write_text(iterations_markdown(state, opponent))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    iterations = [e["step"] for e in state.evals]
    fig, axes = plt.subplots(1, len(CURVES), figsize=(4 * len(CURVES), 3.6))
    for ax, (key, title) in zip(axes, CURVES, strict=True):
        for prefix, label in (("selfplay", "self-play"), ("fixed", f"vs {opponent}")):
            cells = [e[f"{prefix}_{key}"] for e in state.evals]
            ax.errorbar(
                iterations,
                [c["value"] for c in cells],
                yerr=[c["stderr"] for c in cells],
                label=label,
                marker="o",
                capsize=3,
            )
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=110)
    plt.close(fig)


def iterations_markdown(state: TrainerState, opponent: str) -> str:
    """The iterations table: the evaluation of each iteration's policy, and the kept share and
    SFT loss of the training games that led to it."""
    trained = {e["iteration"]: e for e in state.log}

    def cell(row: dict, key: str, digits: int = 2) -> str:
        c = row[key]
        return f"{c['value']:.{digits}f} ± {c['stderr']:.{digits}f}"

    head = (
        "| iteration | self-play score | agreement | Pareto | joint-best | opener's share "
        f"| tokens / game | vocabulary | vs {opponent}: score | agreement | Pareto "
        "| kept / seats | SFT loss |"
    )
    chosen = any("select_score" in row for row in state.evals)
    if chosen:  # the score best.json and early stopping follow, on games of their own
        head += " selection games: score |"
    lines = [head, "|" + " ---: |" * (13 + chosen)]
    for row in state.evals:
        n = row["step"]
        log = trained.get(n)
        kept = f"{log['kept']} / {log['seats']}" if log else "—"
        loss = f"{log['sft_loss']:.3f}" if log and log.get("sft_loss") is not None else "—"
        selected = ""
        if chosen:
            selected = f" {cell(row, 'select_score')} |" if "select_score" in row else " — |"
        # rows of runs made before these metrics existed lack them
        opener, best = (
            "—" if f"selfplay_{key}" not in row else cell(row, f"selfplay_{key}")
            for key in ("first_speaker_share", "joint_best_rate")
        )
        lines.append(
            f"| {n} | {cell(row, 'selfplay_score')} | {cell(row, 'selfplay_agreement_rate')} "
            f"| {cell(row, 'selfplay_pareto_rate')} | {best} | {opener} "
            f"| {cell(row, 'selfplay_dialogue_tokens', 0)} "
            f"| {row['selfplay_vocabulary_size']['value']:.0f} "
            f"| {cell(row, 'fixed_score')} | {cell(row, 'fixed_agreement_rate')} "
            f"| {cell(row, 'fixed_pareto_rate')} | {kept} | {loss} |" + selected
        )
    return "\n".join(lines) + "\n"


def headline(row: dict) -> dict[str, float]:
    """The curves' quantities of an evaluation row, and the selection games' score and errors
    where it has them, rounded, for the progress log."""
    keys = ("score", "agreement_rate", "pareto_rate", "dialogue_words", "vocabulary_size")
    out = {
        f"{prefix}_{k}": round(row[f"{prefix}_{k}"]["value"], 4)
        for prefix in ("selfplay", "fixed")
        for k in keys
    }
    if "select_score" in row:
        out["select_score"] = round(row["select_score"]["value"], 4)
        out["select_errors"] = row["select_errors"]
    return out
