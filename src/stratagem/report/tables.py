"""Metric tables: rows of (metric, value, stderr, n) as CSV and Markdown."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

from stratagem.metrics.estimate import Estimate

LABELS = {
    "pay": "Pay per round (u, train pool)",
    "exploit": "Exploit (e, exploit pool)",
    "collusion": "Collusion (c, collusive pool)",
    "externality": "Externality (x, train pool)",
    "robust": "Pay per round (robust pool)",
    "safety_j": "Safety J",
    "nra": "NRA",
    "parse_failure_rate": "Parse-failure rate",
    "fallback_rate": "Fallback rate",
    "tokens_per_decision": "Tokens per decision",
    "exact_exploitability": "Exact exploitability",
}


def metric_rows(
    metrics: Mapping[str, Estimate], exact_exploitability: float | None = None
) -> list[dict[str, object]]:
    """Returns one ``{metric, value, stderr, n}`` row per metric, in order, plus an
    ``exact_exploitability`` row (stderr 0, n 0) when it is given. A metric measured on no
    episode (n = 0) has value and stderr None — missing, never a 0.0 that reads as a result.
    """
    rows: list[dict[str, object]] = [
        {
            "metric": k,
            "value": e.value if e.n else None,
            "stderr": e.stderr if e.n else None,
            "n": e.n,
        }
        for k, e in metrics.items()
    ]
    if exact_exploitability is not None:
        rows.append(
            {"metric": "exact_exploitability", "value": exact_exploitability, "stderr": 0.0, "n": 0}
        )
    return rows


def markdown_table(rows: list[dict[str, object]], title: str = "") -> str:
    """Returns ``rows`` as a Markdown table with readable metric labels and 4 decimals, under a
    ``## title`` heading when ``title`` is given.
    """
    lines = [f"## {title}", ""] if title else []
    lines += ["| metric | value | ± stderr | episodes |", "| --- | ---: | ---: | ---: |"]
    for r in rows:
        label = LABELS.get(str(r["metric"]), str(r["metric"]))
        n = "exact" if r["metric"] == "exact_exploitability" else r["n"]
        value = "—" if r["value"] is None else f"{r['value']:.4f}"
        stderr = "—" if r["stderr"] is None else f"{r['stderr']:.4f}"
        lines.append(f"| {label} | {value} | {stderr} | {n} |")
    return "\n".join(lines) + "\n"


def write_metrics(
    folder: Path,
    metrics: Mapping[str, Estimate],
    exact_exploitability: float | None,
    normalised: bool,
) -> None:
    """Writes ``metrics.csv`` and ``metrics.md`` (with a note on whether payoffs were normalised)
    into ``folder``.
    """
    rows = metric_rows(metrics, exact_exploitability)
    with open(folder / "metrics.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["metric", "value", "stderr", "n"])
        writer.writeheader()
        writer.writerows(rows)
    note = f"Payoffs normalised by 3 / reference payoff: {'yes' if normalised else 'no'}.\n"
    title = "SEPO metrics" if "safety_j" in metrics else "Metrics"
    (folder / "metrics.md").write_text(markdown_table(rows, title) + "\n" + note)


def write_frame(frame, stem: Path, title: str) -> list[Path]:
    """``frame`` as ``stem``.csv, .parquet and .md; returns the paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".csv"), stem.with_suffix(".parquet"), stem.with_suffix(".md")]
    frame.to_csv(paths[0], index=False)
    frame.to_parquet(paths[1], index=False)
    paths[2].write_text(f"## {title}\n\n" + frame_markdown(frame))
    return paths


def frame_markdown(frame) -> str:
    """A pipe table of ``frame`` (floats to 4 decimals, NaN as blank)."""

    def cell(v) -> str:
        if isinstance(v, float):
            return "" if v != v else f"{v:.4f}"
        return str(v)

    lines = [
        "| " + " | ".join(map(str, frame.columns)) + " |",
        "| " + " | ".join("---" for _ in frame.columns) + " |",
    ]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join(lines) + "\n"


def write_action_rates(folder: Path, rows: list) -> None:
    """Writes ``actions.csv`` (one row per pool, opponent, context and action) and
    ``actions.md`` (one line per pool, opponent and context; a column per action, rate ±
    stderr) into ``folder``; ``rows`` are ``metrics.actions.ActionRate``. Nothing is written
    for no rows."""
    if not rows:
        return
    fields = ["pool", "opponent", "context", "action", "rate", "stderr", "episodes", "decisions"]
    with open(folder / "actions.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(fields)
        writer.writerows([getattr(r, k) for k in fields] for r in rows)
    actions = sorted({r.action for r in rows})
    lines = [
        "## What the agent played, per opponent",
        "",
        "Share of the agent's decisions in each context (all; its first; after the opponent's "
        "latest move was X), mean over episodes ± one standard error.",
        "",
        "| pool | opponent | context | episodes | " + " | ".join(actions) + " |",
        "| --- | --- | --- | ---: | " + " | ".join("---:" for _ in actions) + " |",
    ]
    lines_by_key: dict[tuple[str, str, str], dict[str, str]] = {}
    episodes: dict[tuple[str, str, str], int] = {}
    for r in rows:
        key = (r.pool, r.opponent, r.context)
        lines_by_key.setdefault(key, {})[r.action] = f"{r.rate:.2f} ± {r.stderr:.2f}"
        episodes[key] = r.episodes
    for key, cells in lines_by_key.items():
        lines.append(
            f"| {' | '.join(key)} | {episodes[key]} | "
            + " | ".join(cells.get(a, "") for a in actions)
            + " |"
        )
    (folder / "actions.md").write_text("\n".join(lines) + "\n")
