"""The Deal or No Deal tournament report (SPEC §7; seed 002 §5–6): per pairing of agents, how
often they agree, how often the agreement is Pareto-optimal, and how long they talk.

Files written into the run folder:

- ``summary`` (one row per pairing, seat 0 × seat 1: episodes, then ``agreement_rate``,
  ``pareto_rate``, ``dialogue_turns``, ``dialogue_words`` and each seat's ``score``, each with
  its standard error in a ``*_stderr`` column), as CSV, Parquet and Markdown;
- ``heatmap_agreement.png`` and ``heatmap_pareto.png`` (rows seat 0, columns seat 1).

The metrics are ``metrics.dond``'s, computed over each pairing's complete episodes; a pairing
is ordered (who sits in seat 0 matters: the first speaker is drawn per episode, not per seat).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stratagem.metrics import dond as dm
from stratagem.metrics.estimate import Estimate, mean_estimate
from stratagem.report.registry import TOURNAMENT_REPORTS, TournamentReport
from stratagem.report.tables import write_frame
from stratagem.trace import Trace

if TYPE_CHECKING:  # pandas loads when a report is written
    import pandas as pd

# summary column -> its label in the printed table, in table order
COLUMNS = {
    "agreement_rate": "agreement",
    "pareto_rate": "Pareto",
    "dialogue_turns": "turns",
    "dialogue_words": "words",
    "score_seat0": "score 0",
    "score_seat1": "score 1",
}
# what the CLI prints (the scores stay in the files), with the decimals each needs, so a row of
# ``value±stderr`` cells fits 80 columns
PRINTED = {"agreement_rate": 2, "pareto_rate": 2, "dialogue_turns": 1, "dialogue_words": 0}


def pairing_metrics(traces: Iterable[Trace]) -> dict[tuple[str, str], dict[str, Estimate]]:
    """Returns, per (seat-0 agent, seat-1 agent) in episode-id order of first appearance, the
    report's metrics over that pairing's complete episodes (``COLUMNS``' keys)."""
    groups: dict[tuple[str, str], list[Trace]] = {}
    for t in sorted(dm.complete(list(traces)), key=lambda t: t.episode_id):
        groups.setdefault((t.agents[0], t.agents[1]), []).append(t)
    out = {}
    for pairing, group in groups.items():
        lengths = dm.dialogue_lengths(group)
        out[pairing] = {
            "agreement_rate": dm.agreement_rate(group),
            "pareto_rate": dm.pareto_rate(group),
            "dialogue_turns": lengths["dialogue_turns"],
            "dialogue_words": lengths["dialogue_words"],
            "score_seat0": mean_estimate([t.totals()[0] for t in group]),
            "score_seat1": mean_estimate([t.totals()[1] for t in group]),
        }
    return out


def summary_frame(traces: Iterable[Trace]) -> pd.DataFrame:
    """Returns one row per pairing: ``seat0``, ``seat1``, ``episodes``, then each metric's
    value and ``*_stderr``."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for (first, second), metrics in pairing_metrics(traces).items():
        row: dict[str, Any] = {"seat0": first, "seat1": second}
        row["episodes"] = next(iter(metrics.values())).n
        for key in COLUMNS:
            row[key] = metrics[key].value
            row[f"{key}_stderr"] = metrics[key].stderr
        rows.append(row)
    columns = ["seat0", "seat1", "episodes", *(f"{k}{s}" for k in COLUMNS for s in ("", "_stderr"))]
    return pd.DataFrame(rows, columns=columns)


def write_report(traces: Iterable[Trace], folder: Path) -> tuple[pd.DataFrame, list[Path]]:
    """Writes the DoND summary table and heatmaps of a tournament into ``folder`` from its
    traces; returns (the summary DataFrame, the files written)."""
    from stratagem.report.plots import heatmap

    folder.mkdir(parents=True, exist_ok=True)
    summary = summary_frame(traces)
    files = write_frame(
        summary, folder / "summary", "Deal or No Deal: agreement, Pareto rate and length"
    )
    if len(summary):
        for key, name in (("agreement_rate", "agreement"), ("pareto_rate", "pareto")):
            table = summary.pivot_table(index="seat0", columns="seat1", values=key, sort=False)
            table.index.name, table.columns.name = "seat 0", "seat 1"
            title = f"dond: {COLUMNS[key]} rate per pairing"
            files.append(heatmap(table, folder / f"heatmap_{name}.png", title))
    return summary, files


def summary_table(summary: pd.DataFrame) -> Any:
    """Returns the rich table the CLI prints: one row per pairing, ``mean±stderr`` cells of
    agreement, Pareto rate, turns and words."""
    from rich import box
    from rich.table import Table

    table = Table(title="Deal or No Deal round robin (mean±stderr)", box=box.SIMPLE_HEAD)
    for col in ("seat 0", "seat 1", "n", *(COLUMNS[k] for k in PRINTED)):
        table.add_column(col, justify="left" if col.startswith("seat ") else "right")
    for row in summary.to_dict("records"):
        cells = [f"{row[k]:.{d}f}±{row[f'{k}_stderr']:.{d}f}" for k, d in PRINTED.items()]
        table.add_row(str(row["seat0"]), str(row["seat1"]), str(row["episodes"]), *cells)
    return table


TOURNAMENT_REPORTS.register(TournamentReport(write_report, summary_table), "dond")
