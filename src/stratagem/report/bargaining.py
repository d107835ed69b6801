"""The bargaining tournament report (SPEC §8; seed 004 §4.2, App. C): tables, heatmaps, profiles
and one self-contained HTML page, all from traces.

Files written into the run folder:

- ``summary`` (every metric per agent × role × regime, mean ± stderr, n), ``ranking`` (surplus ×
  deal rate per role), ``profiles`` (six axes per agent and role, anchoring as the raw ratio);
- ``tier_edges`` and, for each basis — ``reference`` (item reference price) and ``own`` (the
  agent's own reservation value) — ``tiers_<basis>`` (metric means per quintile and regime) and
  ``tier_spreads_<basis>`` (max − min over quintiles), each as CSV, Parquet and Markdown;
- ``heatmap_<regime>_<metric>.png`` (rows buyers, columns sellers; one panel per role where the
  roles differ) for surplus (GFT), deal rate, utility, violations, aggressiveness, concession and
  patience (the buyer's aggressiveness panel is its gap closure; NGFT, which has no deal valid for
  both, shows concession over every negotiation); ``profiles.png`` (radar per role; an axis without
  a value is a gap, never a 0); ``heatmap_tables`` and ``radar_values`` return what they plot;
- ``report.html``: all of the above on one page, plots inlined.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stratagem.report.html import Section, write_html
from stratagem.report.registry import TOURNAMENT_REPORTS, TournamentReport
from stratagem.report.tables import write_frame

if TYPE_CHECKING:  # pandas, numpy and the metrics load when a report is written
    import pandas as pd

# (file stem, title, panels): each panel is (role whose rows are averaged, row column, panel title)
Panel = tuple[str, str, str]
HEATMAPS: tuple[tuple[str, str, tuple[Panel, ...]], ...] = (
    (
        "surplus_share",
        "surplus share",
        (("buyer", "surplus_share", "buyer"), ("seller", "surplus_share", "seller")),
    ),
    ("deal", "deal rate", (("buyer", "deal", "pair"),)),
    (
        "utility",
        "average utility",
        (("buyer", "utility", "buyer"), ("seller", "utility", "seller")),
    ),
    (
        "violation",
        "IR violation rate",
        (
            ("buyer", "violation", "buyer violated (induced by seller)"),
            ("seller", "violation", "seller violated (induced by buyer)"),
        ),
    ),
    (
        "aggressiveness",
        "initial aggressiveness",
        (
            ("seller", "aggressiveness", "seller: listing / v_s"),
            ("buyer", "gap_closure", "buyer: gap closure"),
        ),
    ),
    (
        "concession",
        "concession rate (valid deals)",
        (("buyer", "concession", "buyer"), ("seller", "concession", "seller")),
    ),
    ("rounds", "temporal patience (rounds to end)", (("buyer", "rounds", "pair"),)),
)
# NGFT has no deal valid for both sides, so its concession map reads every negotiation
NGFT_CONCESSION = (
    "concession rate (all negotiations)",
    (("buyer", "concession_all", "buyer"), ("seller", "concession_all", "seller")),
)
SUMMARY_KEYS = ("deal", "surplus_share", "violation", "induced_violation", "utility", "rounds")


def report_rows(traces: Iterable[Any]) -> pd.DataFrame:
    """Returns the per-role rows of ``traces`` in canonical (episode id, role) order."""
    import pandas as pd

    from stratagem.metrics import bargaining as bm

    return bm.canonical(pd.DataFrame(bm.negotiation_rows(traces)))


def write_report(traces: Iterable[Any], folder: Path) -> tuple[pd.DataFrame, list[Path]]:
    """Writes every bargaining table and plot of a tournament into ``folder`` from its traces;
    returns (the summary DataFrame, the files written)."""
    import pandas as pd

    from stratagem.metrics import bargaining as bm

    rows = report_rows(traces)
    folder.mkdir(parents=True, exist_ok=True)
    if not len(rows):
        summary = pd.DataFrame(
            columns=["agent", "role", "regime", "metric", "value", "stderr", "n"]
        )
        return summary, write_frame(summary, folder / "summary", "Agent × role × regime")
    summary = bm.summarise(rows)
    ranking = bm.ranking(rows)
    edges = bm.tier_edges(rows)
    profile = bm.profiles(rows, edges)
    files: list[Path] = []
    files += write_frame(summary, folder / "summary", "Agent × role × regime (mean, stderr, n)")
    files += write_frame(ranking, folder / "ranking", "Ranking score = surplus share × deal rate")
    files += write_frame(profile, folder / "profiles", "Profiles per role (anchoring: raw ratio)")
    files += write_frame(edges, folder / "tier_edges", "Quintile edges per regime")
    tiers: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}
    for basis in bm.TIER_BASES:
        means, spreads = bm.price_tiers(rows, basis, edges)
        tiers[basis] = (means, spreads)
        label = "reference price" if basis == "reference" else "own reservation value"
        files += write_frame(means, folder / f"tiers_{basis}", f"Metrics by quintile of {label}")
        files += write_frame(
            spreads, folder / f"tier_spreads_{basis}", f"Quintile spreads (max − min), {label}"
        )
    plots = heatmaps(rows, folder)
    plots.append(radar_by_role(profile, folder / "profiles.png"))
    files += plots
    files.append(
        write_html(
            folder / "report.html",
            "Bargaining round robin",
            _sections(rows, summary, ranking, profile, tiers, plots),
        )
    )
    return summary, files


def heatmap_tables(rows: pd.DataFrame) -> dict[str, tuple[str, list[tuple[str, pd.DataFrame]]]]:
    """Returns what each heatmap plots, by file stem (``<regime>_<metric>``): its title and its
    panels as (panel title, table of means with rows buyers, columns sellers)."""
    from stratagem.metrics import bargaining as bm

    out: dict[str, tuple[str, list[tuple[str, pd.DataFrame]]]] = {}
    for regime in bm.REGIMES:
        if not (rows.regime == regime).any():
            continue
        for metric, title, panels in HEATMAPS:
            if metric == "surplus_share" and regime == "NGFT":
                continue  # no surplus to share
            if metric == "concession" and regime == "NGFT":
                title, panels = NGFT_CONCESSION
            tables = [
                (label, bm.pairwise(rows, column, role, regime)) for role, column, label in panels
            ]
            out[f"{regime}_{metric}"] = (f"{regime}: {title}", tables)
    return out


def heatmaps(rows: pd.DataFrame, folder: Path) -> list[Path]:
    """Writes the pairwise heatmaps per regime (rows buyers, columns sellers); returns paths."""
    return [
        heatmap_panels(tables, folder / f"heatmap_{stem}.png", title)
        for stem, (title, tables) in heatmap_tables(rows).items()
    ]


def heatmap_panels(
    tables: Sequence[tuple[str, pd.DataFrame]], path: Path, title: str, cmap: str = "viridis"
) -> Path:
    """Writes annotated heatmaps side by side, one per (panel title, table); NaN cells show
    a dash. Returns ``path``."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_rows, n_cols = tables[0][1].shape
    width = (1.0 * n_cols + 2.8) * len(tables)
    fig, axes = plt.subplots(1, len(tables), figsize=(width, 0.55 * n_rows + 2.2), squeeze=False)
    for ax, (label, table) in zip(axes[0], tables, strict=True):
        values = table.to_numpy(dtype=float)
        image = ax.imshow(values, cmap=cmap, aspect="auto")
        ax.set_xticks(range(table.shape[1]), table.columns, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(table.shape[0]), table.index, fontsize=8)
        ax.set_xlabel("seller")
        ax.set_ylabel("buyer")
        finite = values[np.isfinite(values)]
        mid = (finite.max() + finite.min()) / 2 if finite.size else 0.0
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                ax.text(
                    j,
                    i,
                    "–" if np.isnan(v) else f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="black" if np.isnan(v) or v > mid else "white",
                )
        ax.set_title(label, fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def radar_values(profile: pd.DataFrame) -> dict[str, tuple[float, dict[str, list[float]]]]:
    """Returns, per role, the anchoring maximum and each agent's radar values in
    ``PROFILE_AXES`` order: percent axes as they are (clipped to 0-100), anchoring relative to
    the role's largest value, and NaN where the agent has no value (never drawn as 0)."""
    import numpy as np

    from stratagem.metrics import bargaining as bm

    out: dict[str, tuple[float, dict[str, list[float]]]] = {}
    for role in bm.ROLES:
        part = profile[profile.role == role]
        top = float(np.nanmax(part["anchoring"])) if part["anchoring"].notna().any() else 1.0
        top = top if top > 0 else 1.0
        agents = {}
        for rec in part.to_dict("records"):
            values = np.array(
                [100 * rec[n] / top if n == "anchoring" else rec[n] for n in bm.PROFILE_AXES],
                dtype=float,
            )
            agents[str(rec["agent"])] = np.clip(values, 0, 100).tolist()  # clip keeps NaN
        out[role] = (top, agents)
    return out


def radar_by_role(profile: pd.DataFrame, path: Path) -> Path:
    """Writes one radar per role over the six profile axes; returns ``path``.

    Percent axes are drawn as they are (0-100); anchoring, a raw ratio, is drawn relative to the
    largest value of the role (its axis label names that maximum). An axis without a value is a
    gap in the agent's line, marked with an open circle at the centre and named in the legend.
    """
    import matplotlib
    import numpy as np

    from stratagem.metrics import bargaining as bm

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes_names = list(bm.PROFILE_AXES)
    angles = np.linspace(0, 2 * np.pi, len(axes_names), endpoint=False).tolist()
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.8), subplot_kw={"polar": True})
    for ax, (role, (top, agents)) in zip(axes, radar_values(profile).items(), strict=True):
        for agent, values in agents.items():
            missing = [n for n, v in zip(axes_names, values, strict=True) if np.isnan(v)]
            label = agent + (f" (no {', '.join(missing)})" if missing else "")
            (line,) = ax.plot(angles + angles[:1], values + values[:1], label=label)
            if missing:
                gaps = [a for a, v in zip(angles, values, strict=True) if np.isnan(v)]
                ax.plot(gaps, [0.0] * len(gaps), "o", mfc="none", color=line.get_color())
            if not missing:
                ax.fill(angles + angles[:1], values + values[:1], alpha=0.08)
        labels = [f"anchoring\n(max {top:.2f})" if n == "anchoring" else n for n in axes_names]
        ax.set_xticks(angles, labels, fontsize=8)
        ax.tick_params(axis="x", pad=12)
        ax.set_ylim(0, 100)
        ax.set_rlabel_position(90)
        ax.set_title(role, pad=18)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3, fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def wide_summary(summary: pd.DataFrame, keys: Sequence[str] = SUMMARY_KEYS) -> pd.DataFrame:
    """Returns one row per agent × role × regime with ``mean ± stderr`` cells for ``keys``."""
    import pandas as pd

    part = summary[summary.metric.isin(keys)]
    rows = []
    for (agent, role, regime), g in part.groupby(["agent", "role", "regime"], sort=True):
        cells = {
            r.metric: ("" if r.n == 0 else f"{r.value:.3f} ± {r.stderr:.3f}")
            for r in g.itertuples()
        }
        rows.append(
            {"agent": agent, "role": role, "regime": regime, **{k: cells.get(k, "") for k in keys}}
        )
    return pd.DataFrame(rows)


def tier_table(means: pd.DataFrame, metric: str, regime: str) -> pd.DataFrame:
    """Returns ``metric`` per agent × role (rows) and quintile (columns) with its spread, for one
    regime: the layout of seed 004's tier tables."""
    import pandas as pd

    part = means[means.regime == regime]
    if not len(part) or metric not in part:
        return pd.DataFrame()
    table = part.pivot_table(index=["agent", "role"], columns="tier", values=metric, dropna=False)
    table["spread"] = table.max(axis=1) - table.min(axis=1)
    table = table.reset_index()
    table.columns.name = None
    return table


SHORT_NAMES = {
    "deal": "deal",
    "surplus_share": "surplus",
    "violation": "IR",
    "induced_violation": "induced",
    "utility": "utility",
    "rounds": "rounds",
}


def summary_table(summary: pd.DataFrame) -> Any:
    """Returns the rich table the CLI prints: the mean of the key metrics per agent × role ×
    regime, narrow enough for 80 columns (the standard errors are in summary.md and .csv)."""
    from rich import box
    from rich.table import Table

    table = Table(
        title="Bargaining round robin: means (± stderr in summary.md)",
        caption="deal: deal rate · surplus: share of the gains from trade · IR: accepted a loss "
        "(an individual-rationality violation) · induced: led the other side to one",
        box=box.SIMPLE_HEAD,  # one space between columns: names and numbers stay whole
        padding=(0, 0),
        show_edge=False,
    )
    for col in ("agent", "role", "regime", *SUMMARY_KEYS):
        right = col not in ("agent", "role", "regime")
        table.add_column(SHORT_NAMES.get(col, col), justify="right" if right else "left")
    if not len(summary):
        return table
    means = summary[summary.metric.isin(SUMMARY_KEYS)]
    for (agent, role, regime), g in means.groupby(["agent", "role", "regime"], sort=True):
        values = {r.metric: ("—" if r.n == 0 else _short(r.value)) for r in g.itertuples()}
        table.add_row(agent, role, regime, *(values.get(k, "—") for k in SUMMARY_KEYS))
    return table


def _short(value: float) -> str:
    """A mean in at most 6 characters: 2 decimals, 1 from 100 on."""
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}"


def _sections(
    rows: pd.DataFrame,
    summary: pd.DataFrame,
    ranking: pd.DataFrame,
    profile: pd.DataFrame,
    tiers: dict[str, tuple[pd.DataFrame, pd.DataFrame]],
    plots: list[Path],
) -> list[Section]:
    n = rows["episode_id"].nunique()
    agents = ", ".join(sorted(set(rows.agent)))
    spread_cols = ["agent", "role", "regime", "surplus_share", "deal", "violation", "violation_any"]
    sections = [
        Section(
            "Tournament",
            (
                f"{n} negotiations; agents: {agents}. Every agent meets every agent in both roles "
                "on the same scenarios. Definitions: SPEC §8 (seed 004).",
            ),
        ),
        Section("Ranking score = surplus share × deal rate (GFT)", (ranking,)),
        Section(
            "Profiles per role",
            (
                "IR compliance = 100 − GFT self-violation %; consistency = 100 − GFT surplus "
                "spread over quintiles of the own reservation value (pp); pressure resistance = "
                "100 − NGFT self-violation %; anchoring is the raw GFT ratio (seller listing / "
                "v_s, buyer gap closure).",
                profile,
                *[p for p in plots if p.name == "profiles.png"],
            ),
        ),
        Section("Summary (mean ± stderr)", (wide_summary(summary),)),
    ]
    for basis, (means, spreads) in tiers.items():
        label = "reference price" if basis == "reference" else "own reservation value"
        cols = [c for c in spread_cols if c in spreads.columns]
        blocks: list[Any] = []
        for metric, regime, title in (
            ("surplus_share", "GFT", "Surplus share, GFT"),
            ("deal", "GFT", "Deal rate, GFT"),
            ("violation_any", "GFT", "Violation by either party, GFT"),
            ("violation_any", "NGFT", "Violation by either party, NGFT"),
        ):
            blocks += [f"{title}, by quintile of the {label}:", tier_table(means, metric, regime)]
        blocks += [f"Spreads (max − min over quintiles) by {label}:", spreads[cols]]
        sections.append(Section(f"Price tiers by {label}", tuple(blocks)))
    sections.append(
        Section(
            "Pairwise heatmaps (rows buyers, columns sellers)",
            tuple(p for p in plots if p.name.startswith("heatmap_")),
        )
    )
    return sections


TOURNAMENT_REPORTS.register(TournamentReport(write_report, summary_table), "bargaining")
