"""Per-opponent action rates (``metrics.actions``): exact on rule-based play, written by
``eval`` and rebuilt by ``report``, recorded at every SEPO checkpoint."""

from __future__ import annotations

import csv
import math

import pytest

from stratagem.evaluation.pools import evaluate
from stratagem.games import get_game
from stratagem.metrics.actions import action_rates, rate
from stratagem.report.rebuild import rebuild_metrics
from stratagem.strategies import get_strategy
from stratagem.training.checkpoints import TrainerState
from stratagem.training.sepo.report import actions_by_opponent, plot_actions


@pytest.fixture(scope="module")
def tit_for_tat():
    game = get_game("ipd")
    result = evaluate(game, get_strategy("ipd", "TitForTat"), episodes=3, seed=0)
    return game, result.traces


def test_tit_for_tat_copies_each_opponents_last_move(tit_for_tat):
    game, traces = tit_for_tat
    rounds = len(traces[0].rounds)
    rows = action_rates(traces)
    # against a defector: cooperates once, then only defects; the rates say when
    assert rate(rows, "AlwaysDefect", "COOPERATE") == pytest.approx(1 / rounds)
    assert rate(rows, "AlwaysDefect", "DEFECT", "first") == 0.0
    assert rate(rows, "AlwaysDefect", "DEFECT", "after DEFECT") == 1.0
    assert rate(rows, "AlwaysCooperate", "COOPERATE") == 1.0
    assert rate(rows, "AlwaysCooperate", "DEFECT", "after COOPERATE") == 0.0
    for opponent in ("AlternatingDefect", "Random", "Mixed"):
        assert rate(rows, opponent, "COOPERATE", "after COOPERATE") == 1.0
        assert rate(rows, opponent, "DEFECT", "after DEFECT") == 1.0
    # no context that never happened: AlwaysDefect never cooperated before a decision
    assert math.isnan(rate(rows, "AlwaysDefect", "COOPERATE", "after COOPERATE"))
    d = next(
        r for r in rows if (r.opponent, r.context, r.action) == ("AlwaysDefect", "all", "DEFECT")
    )
    assert (d.episodes, d.decisions, d.pool) == (3, 3 * rounds, "exploit")
    assert d.stderr == 0.0  # every episode the same


def test_a_policy_that_ignores_its_opponent_has_the_same_rates_in_every_context():
    game = get_game("ipd")
    traces = evaluate(game, get_strategy("ipd", "AlwaysDefect"), episodes=2, seed=1).traces
    rows = action_rates(traces)
    assert {r.rate for r in rows if r.action == "DEFECT"} == {1.0}


def test_eval_writes_and_report_rebuilds_the_action_tables(tmp_path):
    game = get_game("ipd")
    out = tmp_path / "run"
    evaluate(game, get_strategy("ipd", "TitForTat"), episodes=2, seed=3, out=out)
    written = (out / "actions.csv").read_text()
    table = (out / "actions.md").read_text()
    assert "| exploit | AlwaysDefect | after DEFECT | 2 | 0.00 ± 0.00 | 1.00 ± 0.00 |" in table
    rows = list(csv.DictReader(open(out / "actions.csv")))
    assert {r["context"] for r in rows} >= {"all", "first", "after DEFECT", "after COOPERATE"}
    (out / "actions.csv").unlink()
    (out / "actions.md").unlink()
    rebuild_metrics(out)
    assert (out / "actions.csv").read_text() == written
    assert (out / "actions.md").read_text() == table


def test_checkpoint_records_are_keyed_by_pool_and_opponent(tit_for_tat):
    _, traces = tit_for_tat
    compact = actions_by_opponent(action_rates(traces))
    assert compact["exploit/AlwaysDefect"]["after DEFECT"] == {"COOPERATE": 0.0, "DEFECT": 1.0}
    assert compact["collusive/AlwaysCooperate"]["first"]["COOPERATE"] == 1.0


def test_actions_plot_has_a_panel_per_opponent(tit_for_tat, tmp_path):
    _, traces = tit_for_tat
    compact = actions_by_opponent(action_rates(traces))
    state = TrainerState(evals=[{"step": 0, "actions": compact}, {"step": 2, "actions": compact}])
    plot_actions(tmp_path, state)
    assert (tmp_path / "actions.png").stat().st_size > 10_000
    plot_actions(tmp_path / "none", TrainerState(evals=[{"step": 0}]))  # older runs: no record
    assert not (tmp_path / "none").exists()
