"""The bargaining tournament report (SPEC §8): files, per-role profiles, tiers, heatmaps, HTML,
and tables that do not depend on trace order (a resumed run)."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from stratagem.games.bargaining import Bargaining
from stratagem.play import EpisodeSpec, play
from stratagem.report.bargaining import summary_table, write_report
from stratagem.report.registry import tournament_report
from stratagem.strategies import get_strategy

NAMES = ["Boulware", "Linear", "Conceder", "TitForTatConcession", "NaiveAccepter"]


@pytest.fixture(scope="module")
def traces():
    game = Bargaining(split="test")
    scenes = game.tournament_scenarios(30, 15, seed=7)
    specs = [
        EpisodeSpec(
            f"{a}|{b}|{i:05d}",
            i,
            (get_strategy("bargaining", a), get_strategy("bargaining", b)),
            scenario=sc,
        )
        for a in NAMES
        for b in NAMES
        for i, sc in enumerate(scenes)
    ]
    return list(play(game, specs))


@pytest.fixture(scope="module")
def report(traces, tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    summary, files = tournament_report("bargaining").write(iter(traces), folder)
    return folder, summary, files


def test_the_report_writes_tables_heatmaps_profiles_and_one_html_page(report):
    folder, summary, files = report
    names = {f.name for f in files}
    for stem in (
        "summary",
        "ranking",
        "profiles",
        "tier_edges",
        "tiers_reference",
        "tier_spreads_reference",
        "tiers_own",
        "tier_spreads_own",
    ):
        assert {f"{stem}.csv", f"{stem}.parquet", f"{stem}.md"} <= names, stem
    for regime in ("GFT", "NGFT"):
        for metric in ("deal", "utility", "violation", "aggressiveness", "concession", "rounds"):
            assert f"heatmap_{regime}_{metric}.png" in names
    assert "heatmap_GFT_surplus_share.png" in names
    assert "heatmap_NGFT_surplus_share.png" not in names  # no surplus to share
    assert all(f.exists() and f.parent == folder for f in files)
    assert (folder / "profiles.png").read_bytes()[:4] == b"\x89PNG"
    page = (folder / "report.html").read_text()
    assert page.count("data:image/png;base64,") == sum(n.endswith(".png") for n in names)
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "Ranking score" in page and "Boulware" in page


def test_profiles_are_per_role_and_anchoring_is_the_raw_ratio(report):
    folder, _, _ = report
    prof = pd.read_csv(folder / "profiles.csv").set_index(["agent", "role"])
    assert len(prof) == 2 * len(NAMES)
    sellers = prof.xs("seller", level="role")
    assert (sellers["anchoring"] >= 1.5 - 1e-3).all()  # list at ≥ 1.5 × cost, raw
    assert sellers.loc["Boulware", "anchoring"] > 1.5  # no clipping to a 0-100 scale
    buyers = prof.xs("buyer", level="role")
    assert buyers["anchoring"].dropna().between(0, 1).all()  # gap closure
    assert prof.loc[("Boulware", "seller"), "IR compliance"] == 100.0
    assert prof.loc[("NaiveAccepter", "buyer"), "pressure resistance"] == 0.0


def test_ranking_scores_and_tier_spreads(report):
    folder, _, _ = report
    rank = pd.read_csv(folder / "ranking.csv")
    assert set(rank.role) == {"seller", "buyer"} and len(rank) == 2 * len(NAMES)
    assert (rank.score - rank.surplus_share * rank.deal_rate).abs().max() < 1e-12
    spreads = pd.read_csv(folder / "tier_spreads_own.csv")
    assert set(spreads.regime) == {"GFT", "NGFT"}
    assert spreads[spreads.regime == "NGFT"]["surplus_share"].isna().all()
    edges = pd.read_csv(folder / "tier_edges.csv")
    assert set(zip(edges.regime, edges.value, strict=True)) == {
        (r, v) for r in ("GFT", "NGFT") for v in ("reference", "seller_value", "buyer_value")
    }


def test_tables_do_not_depend_on_trace_order(traces, report, tmp_path):
    folder, _, _ = report
    shuffled = list(traces)
    random.Random(3).shuffle(shuffled)
    write_report(iter(shuffled), tmp_path)
    for name in ("summary.csv", "ranking.csv", "profiles.csv", "tiers_own.csv", "tier_edges.csv"):
        assert (tmp_path / name).read_bytes() == (folder / name).read_bytes(), name


def test_ngft_deal_rate_equals_the_combined_violation_rate_in_every_pairing(report):
    folder, summary, _ = report
    ngft = summary[summary.regime == "NGFT"].pivot_table(
        index=["agent", "role"], columns="metric", values="value"
    )
    assert (ngft["deal"] - ngft["violation_any"]).abs().max() < 1e-12


def test_the_cli_table(report):
    from rich.console import Console

    _, summary, _ = report
    console = Console(record=True, width=80)
    console.print(tournament_report("bargaining").table(summary))
    text = console.export_text()
    assert "Bargaining round robin" in text and "TitForTatConcession" in text
    assert "…" not in text and max(map(len, text.splitlines())) <= 80  # names and numbers whole
    row = next(line.split() for line in text.splitlines() if line.startswith("Boulware  "))
    assert row[:3] == ["Boulware", "buyer", "GFT"] and all(c[0] in "-0123456789—" for c in row[3:])


def test_an_empty_run_still_reports(tmp_path):
    summary, files = write_report(iter(()), tmp_path)
    assert len(summary) == 0 and (tmp_path / "summary.csv").exists() and files
    assert summary_table(summary).row_count == 0
