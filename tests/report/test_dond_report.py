"""The Deal or No Deal tournament report: agreement, Pareto rate and dialogue length per
pairing, registered in the report registry and written by a rule-based round robin."""

from __future__ import annotations

import pytest

from stratagem.games import get_game
from stratagem.metrics import dond as dm
from stratagem.report.registry import TOURNAMENT_REPORTS, tournament_report
from stratagem.strategies import get_strategy
from stratagem.tournament import round_robin
from stratagem.trace import read_traces

NAMES = ("FairSplit", "Stubborn", "ValueGreedy")


@pytest.fixture(scope="module")
def tournament(tmp_path_factory):
    game = get_game("dond")
    agents = {n: get_strategy("dond", n) for n in NAMES}
    folder = tmp_path_factory.mktemp("dond") / "t"
    return round_robin(game, agents, folder, count=4, seed=3)


def test_dond_registers_its_tournament_report():
    assert "dond" in TOURNAMENT_REPORTS
    assert tournament_report("ipd") is None


def test_the_summary_has_one_row_per_pairing_with_the_dond_metrics(tournament):
    summary = tournament.summary
    assert tournament.episodes == len(NAMES) ** 2 * 4 and tournament.errors == 0
    assert list(zip(summary.seat0, summary.seat1, strict=True)) == [
        (a, b) for a in NAMES for b in NAMES
    ]
    assert (summary.episodes == 4).all()
    traces = read_traces(tournament.out / "traces.jsonl")
    for row in summary.to_dict("records"):
        group = [t for t in traces if t.agents == (row["seat0"], row["seat1"])]
        lengths = dm.dialogue_lengths(group)
        expected = {
            "agreement_rate": dm.agreement_rate(group),
            "pareto_rate": dm.pareto_rate(group),
            "dialogue_turns": lengths["dialogue_turns"],
            "dialogue_words": lengths["dialogue_words"],
        }
        for key, estimate in expected.items():
            assert row[key] == pytest.approx(estimate.value), key
            assert row[f"{key}_stderr"] == pytest.approx(estimate.stderr), key
        assert 0 <= row["pareto_rate"] <= row["agreement_rate"] <= 1
    # not every pairing agrees every time: the table tells them apart
    assert summary.agreement_rate.nunique() > 1


def test_the_report_files_and_the_printed_table(tournament):
    names = {p.name for p in tournament.files}
    assert {"summary.csv", "summary.parquet", "summary.md"} <= names
    assert {"heatmap_agreement.png", "heatmap_pareto.png"} <= names
    assert all(p.exists() for p in tournament.files)
    assert "agreement_rate" in (tournament.out / "summary.md").read_text()
    table = tournament_report("dond").table(tournament.summary)
    assert table.row_count == len(NAMES) ** 2
    assert [c.header for c in table.columns][:3] == ["seat 0", "seat 1", "n"]
