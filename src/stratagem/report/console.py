"""Terminal tables of results (rich), shaped to fit an 80-column terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from stratagem.report.tables import LABELS

if TYPE_CHECKING:
    from stratagem.evaluation import Evaluation


def estimate_cell(value: float, stderr: float) -> str:
    """``value ± stderr`` in one cell, 4 decimals (about 17 characters)."""
    return f"{value:.4f} ± {stderr:.4f}"


def print_evaluation(console: Console, result: Evaluation) -> None:
    """Prints the metrics table of an evaluation (a metric measured on no episode as —), whether
    payoffs were normalised, the error count and the run folder."""
    n_ep = result.episodes or len(result.traces)
    kind = "SEPO metrics" if "safety_j" in result.metrics else "Metrics"
    table = Table(title=f"{kind} · {result.game} · {result.agent} · {n_ep} episodes")
    table.add_column("metric")
    table.add_column("value ± stderr", justify="right", no_wrap=True)
    table.add_column("episodes", justify="right")
    for key, est in result.metrics.items():
        label = LABELS.get(key, key)
        if est.n == 0:  # nothing measured: missing, never a 0.0 that reads as a result
            table.add_row(label, "—", "0")
        else:
            table.add_row(label, estimate_cell(est.value, est.stderr), str(est.n))
    if result.exact_exploitability is not None:
        table.add_row(LABELS["exact_exploitability"], f"{result.exact_exploitability:.6f}", "exact")
    console.print(table)
    console.print(
        f"payoffs normalised: {'yes' if result.normalised else 'no'}"
        + (f" · errors: {result.errors}" if result.errors else "")
    )
    if result.out is not None:
        console.print(f"run folder: {result.out}")
