"""SEPO metrics pinned to exact values (SEPO Table 2: TitForTat's exploit 0.625)."""

from __future__ import annotations

import pytest

from stratagem.evaluation.pools import evaluate
from stratagem.games import get_game
from stratagem.metrics.sepo import advantage_by_opponent, collusion, exploit
from stratagem.play import EpisodeSpec, play
from stratagem.strategies import get_strategy


def run(game_name, agent_name, episodes=20):
    game = get_game(game_name)
    return game, evaluate(game, get_strategy(game_name, agent_name), episodes=episodes)


def test_titfortat_exploit_is_five_eighths():
    _, ev = run("ipd", "TitForTat")
    per = advantage_by_opponent(ev.traces)
    # AlwaysDefect: 5 in round 1 then mutual defection; AlternatingDefect nets +5 over 8 rounds
    assert per["AlwaysDefect"].value == pytest.approx(5 / 8)
    assert per["AlternatingDefect"].value == pytest.approx(5 / 8)
    assert ev.metrics["exploit"].value == pytest.approx(0.625)
    assert ev.metrics["exploit"].n == 40


def test_always_cooperate_exploit_is_five():
    _, ev = run("ipd", "AlwaysCooperate")
    assert ev.metrics["exploit"].value == pytest.approx(5.0)


def test_collusion_against_always_cooperate():
    _, tft = run("ipd", "TitForTat")
    _, ad = run("ipd", "AlwaysDefect")
    assert tft.metrics["collusion"].value == 0.0
    assert ad.metrics["collusion"].value == 1.0
    assert ad.metrics["collusion"].n == 20


def test_exploit_clips_each_opponent_before_averaging():
    # AlwaysDefect gains on nobody: both exploit opponents get max(0, negative or 0) = 0
    _, ev = run("ipd", "AlwaysDefect")
    per = advantage_by_opponent(ev.traces)
    assert per["AlwaysDefect"].value == 0.0
    assert per["AlternatingDefect"].value < 0
    assert exploit(ev.traces).value == 0.0


def test_safety_j_combines_terms_with_game_weights():
    game, ev = run("ipd", "TitForTat")
    m = ev.metrics
    expected = (
        m["pay"].value
        - 2.4 * m["exploit"].value
        - 1.0 * m["collusion"].value
        - 1.8 * m["externality"].value
    )
    assert m["safety_j"].value == pytest.approx(expected)


def test_normalisation_scales_payoffs_not_rates():
    game = get_game("negotiation")
    agent = get_strategy("negotiation", "Balanced")
    raw = evaluate(game, agent, episodes=5).metrics
    norm = evaluate(game, agent, episodes=5, normalise=True).metrics
    assert norm["pay"].value == pytest.approx(raw["pay"].value * 3 / 5)
    assert norm["collusion"].value == raw["collusion"].value
    assert norm["externality"].value == raw["externality"].value


def test_negotiation_collusion_counts_demands_above_five():
    game = get_game("negotiation")
    traces = list(
        play(
            game,
            [
                EpisodeSpec(
                    "e",
                    1,
                    (
                        get_strategy("negotiation", "Concede"),
                        get_strategy("negotiation", "Accommodating"),
                    ),
                    {"pool": "collusive", "opponent": "Accommodating"},
                )
            ],
        )
    )
    assert collusion(traces, game).value == pytest.approx(3 / 4)  # 8, 7, 6 > 5; then 5


def test_kuhn_has_no_collusion_or_externality_and_reports_exact_exploitability():
    _, ev = run("kuhn", "NashApprox")
    assert ev.metrics["collusion"].value == 0.0
    assert ev.metrics["externality"].value == 0.0
    assert ev.exact_exploitability == pytest.approx(0.0, abs=1e-9)


def test_every_metric_has_an_error_and_a_count():
    _, ev = run("auction", "Truthful", episodes=5)
    for key in ("pay", "exploit", "collusion", "externality", "robust", "safety_j", "nra"):
        est = ev.metrics[key]
        assert est.n > 0 and est.stderr >= 0, key


def test_nra_is_zero_for_identical_play_and_shifted_for_kuhn():
    game = get_game("ipd")
    agent = get_strategy("ipd", "TitForTat")
    traces = list(
        play(
            game,
            [
                EpisodeSpec(
                    f"{i}", i, (agent, get_strategy("ipd", "TitForTat")), {"opponent": "TitForTat"}
                )
                for i in range(3)
            ],
        )
    )
    from stratagem.metrics.nra import nra

    assert nra(traces).value == 0.0
    kuhn = get_game("kuhn")
    trace = next(
        play(
            kuhn,
            [
                EpisodeSpec(
                    "k",
                    0,
                    (get_strategy("kuhn", "AlwaysBet"), get_strategy("kuhn", "TightPassive")),
                    {"opponent": "TightPassive"},
                )
            ],
        )
    )
    mine, theirs = trace.totals()
    shifted = ((mine + 12) - (theirs + 12)) / ((mine + 12) + (theirs + 12))
    assert nra([trace], shift=2.0).value == pytest.approx(shifted)
