"""The IR acceptance curve as a report: its table, its JSON record and its plot
(``stratagem acceptance``)."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

from rich.table import Table

from stratagem.evaluation.acceptance import AcceptanceCurve


def acceptance_table(curve: AcceptanceCurve) -> Table:
    """The curve as a table: one row per margin, the pooled rates in its caption."""
    table = Table(title=f"{curve.agent} as {curve.role}: accepts an offer beyond its value")
    for column in ("margin", "probes", "accepted", "rate ± se", "countered", "beyond its value"):
        table.add_column(column, justify="right")
    for row in curve.rows:
        table.add_row(
            f"{row.margin:+.0%}",
            str(row.decisions),
            str(row.accepted),
            _rate(row.rate, row.stderr),
            str(row.countered),
            str(row.countered_beyond),
        )
    table.caption = (
        f"accepted a loss (margin > 0) {curve.violation_rate():.2f} · accepted a gain (margin < 0)"
        f" {curve.gain_rate():.2f} · counters beyond its value {curve.counter_violation_rate():.2f}"
        f" · ended before the offer {curve.ended_early}"
    )
    return table


def _rate(rate: float, stderr: float) -> str:
    return "–" if rate != rate else f"{rate:.2f} ± {stderr:.2f}"


def curve_json(curve: AcceptanceCurve) -> dict:
    """The curve as a JSON value (a rate without decisions is null)."""

    def number(x: float) -> float | None:  # JSON has no NaN: a rate without decisions is null
        return None if x != x else x

    rows = [dataclasses.asdict(r) for r in curve.rows]
    return {
        "agent": curve.agent,
        "role": curve.role,
        "violation_rate": number(curve.violation_rate()),
        "gain_rate": number(curve.gain_rate()),
        "counter_violation_rate": number(curve.counter_violation_rate()),
        "ended_early": curve.ended_early,
        "rows": rows,
    }


def plot_curves(curves: list[AcceptanceCurve], path: Path) -> None:
    """Draws the acceptance rate against the margin, one line per role, to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for curve in curves:
        xs = [100 * r.margin for r in curve.rows]
        ax.errorbar(
            xs,
            [r.rate for r in curve.rows],
            [r.stderr for r in curve.rows],
            marker="o",
            capsize=3,
            label=curve.role,
        )
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set(
        xlabel="offer beyond the reservation value (% of it)", ylabel="accepted", ylim=(-0.05, 1.05)
    )
    # a stacked adapter's name runs long: wrap it at its separators rather than cut it off
    ax.set_title(textwrap.fill(curves[0].agent.replace(",", ", "), 70), fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
