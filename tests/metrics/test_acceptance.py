"""The IR acceptance curve: exact rates for scripted seats whose rule is known."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from stratagem.agent import Decision, Strategy
from stratagem.errors import ConfigError
from stratagem.evaluation.acceptance import MARGINS, HoldAt, acceptance_curve
from stratagem.games.bargaining import Bargaining, BargainingView, Call, Invalid, Turn
from stratagem.strategies.bargaining import (
    Boulware,
    NaiveAccepter,
    ReservationPrice,
    accept,
    offer,
)

GAME = Bargaining(split="validation")
SCENARIOS = GAME.tournament_scenarios(3, 2, seed=7)


@dataclass(frozen=True)
class Rational(Strategy):
    """Accepts exactly the open offers that leave it at least as well off as no deal."""

    game = "bargaining"

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        price = view.their_standing
        if price is not None and not view.listing:
            good = price >= view.reservation if view.role == "seller" else price <= view.reservation
            if good:
                return accept()
        return offer(view.low if view.role == "buyer" else view.high, view)


@dataclass(frozen=True)
class Overreach(Strategy):
    """Refuses every open offer and counters 10 % beyond its own reservation value."""

    game = "bargaining"

    def choose(self, view: BargainingView, rng: random.Random) -> Turn:
        loss = 1.1 if view.role == "buyer" else 0.9
        return offer(view.reservation * loss, view)


class Garbled:
    """An agent whose every answer is refused by the game (the fallback turn is played)."""

    name = "garbled"

    def act(self, batch):
        return [Decision(Invalid("no action found"), text="???") for _ in batch]


@pytest.mark.parametrize("role", ["seller", "buyer"])
def test_a_seat_that_compares_the_price_steps_at_its_reservation_value(role):
    curve = acceptance_curve(Rational(), GAME, SCENARIOS, role)
    assert [r.margin for r in curve.rows] == list(MARGINS)
    assert all(r.decisions == len(SCENARIOS) for r in curve.rows)
    assert [r.rate for r in curve.rows] == [1.0] * 4 + [0.0] * 4
    assert (curve.gain_rate(), curve.violation_rate(), curve.ended_early) == (1.0, 0.0, 0)


@pytest.mark.parametrize("role", ["seller", "buyer"])
def test_the_naive_accepter_is_flat_at_one(role):
    curve = acceptance_curve(NaiveAccepter(), GAME, SCENARIOS, role)
    assert [r.rate for r in curve.rows] == [1.0] * len(MARGINS)
    assert curve.violation_rate() == 1.0


@pytest.mark.parametrize("role", ["seller", "buyer"])
def test_the_reservation_price_responder_steps_at_zero_and_never_counters(role):
    curve = acceptance_curve(ReservationPrice(), GAME, SCENARIOS, role)
    assert [r.rate for r in curve.rows] == [1.0] * 4 + [0.0] * 4
    assert [r.countered for r in curve.rows] == [0] * 8
    assert math.isnan(curve.counter_violation_rate())


def test_boulware_never_accepts_a_loss_and_holds_out_early():
    # in its first answer Boulware's target is still near its anchor, so it refuses even some
    # offers that would gain it; an offer beyond its reservation value never
    for role in ("seller", "buyer"):
        curve = acceptance_curve(Boulware(), GAME, SCENARIOS, role)
        assert curve.violation_rate() == 0.0
        assert curve.gain_rate() < 1.0


@pytest.mark.parametrize("role", ["seller", "buyer"])
def test_at_its_deadline_boulware_takes_exactly_the_offers_that_gain_it(role):
    curve = acceptance_curve(Boulware(), GAME, SCENARIOS, role, deadline=True)
    assert [r.rate for r in curve.rows] == [1.0] * 4 + [0.0] * 4
    # every refusal counters at its reservation value: a price it can take, never beyond it
    assert [r.countered for r in curve.rows] == [0] * 4 + [len(SCENARIOS)] * 4
    assert curve.counter_violation_rate() == 0.0


def test_counters_beyond_the_reservation_value_are_counted():
    for role in ("seller", "buyer"):
        curve = acceptance_curve(Overreach(), GAME, SCENARIOS, role)
        assert curve.violation_rate() == 0.0 and curve.counter_violation_rate() == 1.0
        assert all(r.countered == r.decisions == len(SCENARIOS) for r in curve.rows)
    first = acceptance_curve(Boulware(), GAME, SCENARIOS, "buyer")
    assert first.counter_violation_rate() == 0.0  # it opens far below its value


def test_an_answer_the_game_refuses_counts_as_a_refusal_after_its_fallback():
    curve = acceptance_curve(Garbled(), GAME, SCENARIOS[:2], "buyer", margins=(-0.2, 0.2))
    assert [(r.decisions, r.accepted) for r in curve.rows] == [(2, 0), (2, 0)]
    assert [r.countered for r in curve.rows] == [0, 0]  # the fallback turn only waits


class Failing:
    """An agent whose model call gives up on every decision."""

    name = "failing"

    def act(self, batch):
        return [Decision(Invalid("no answer"), error="timeout: no reply in 60 s") for _ in batch]


def test_the_curve_keeps_every_probe_episode_with_the_seats_own_words():
    curve = acceptance_curve(Garbled(), GAME, SCENARIOS, "buyer", margins=(-0.1, 0.2))
    assert [t.meta["margin"] for t in curve.traces] == [-0.1, 0.2] * len(SCENARIOS)
    assert {t.meta["probe_role"] for t in curve.traces} == {"buyer"}
    assert {t.agents for t in curve.traces} == {("HoldAt", "garbled")}
    for trace in curve.traces:  # the probed buyer decides in round 2, the holder never speaks
        assert [(d.round, d.text) for d in trace.decisions if d.seat == 1][0] == (2, "???")
        assert all(d.text is None for d in trace.decisions if d.seat == 0)


def test_a_failed_model_call_is_never_counted_as_a_refusal():
    curve = acceptance_curve(Failing(), GAME, SCENARIOS[:2], "buyer", margins=(-0.2, 0.2))
    assert [r.decisions for r in curve.rows] == [0, 0]
    assert curve.errors == ("timeout: no reply in 60 s",) * 4
    assert curve.violation_rate() != curve.violation_rate()  # nan: nothing was decided


def test_the_holder_offers_its_price_and_never_accepts():
    state = GAME.from_scenario(SCENARIOS[0], 1)
    listing = HoldAt(123.45).choose(state.view(0), random.Random(0))
    assert [c.render() for c in listing.calls] == [
        "make_offer(price=123.45)",
        "wait_for_response()",
    ]
    # facing an open offer, even a generous one, it rejects and repeats its price
    state.apply({0: Turn((Call("make_offer", (("price", 1.0),)),))})
    answer = HoldAt(123.45).choose(state.view(1), random.Random(0))
    assert [c.render() for c in answer.calls] == [
        "respond_to_offer(response=False)",
        "make_offer(price=123.45)",
        "wait_for_response()",
    ]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"role": "broker"}, "role"),
        ({"role": "buyer", "margins": (0.1, 1.0)}, "margins"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        acceptance_curve(Rational(), GAME, SCENARIOS, **kwargs)
    with pytest.raises(ConfigError, match="no scenarios"):
        acceptance_curve(Rational(), GAME, [], "buyer")


def test_the_command_writes_the_curves_and_refuses_a_bad_role(tmp_path):
    import json
    import subprocess
    import sys

    def stratagem(*args):
        return subprocess.run(
            [sys.executable, "-m", "stratagem.cli.main", "acceptance", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )

    r = stratagem("--agent", "strategy:NaiveAccepter", "--gft", "2", "--ngft", "1", "-o", "out")
    assert r.returncode == 0, r.stderr
    curves = json.loads((tmp_path / "out/curves.json").read_text())
    assert [(c["role"], c["violation_rate"], c["gain_rate"]) for c in curves] == [
        ("seller", 1.0, 1.0),
        ("buyer", 1.0, 1.0),
    ]
    assert all(row["decisions"] == 3 for c in curves for row in c["rows"])
    assert [c["counter_violation_rate"] for c in curves] == [None, None]  # it never counters
    assert (tmp_path / "out/curves.png").stat().st_size > 0
    probes = [json.loads(line) for line in (tmp_path / "out/traces.jsonl").open()]
    assert len(probes) == 2 * 3 * len(MARGINS)  # roles × scenarios × margins
    assert [p["meta"]["probe_role"] for p in probes[:: 3 * len(MARGINS)]] == ["seller", "buyer"]
    assert {tuple(p["agents"]) for p in probes[: 3 * len(MARGINS)]} == {("NaiveAccepter", "HoldAt")}
    assert {p["meta"]["deadline"] for p in probes} == {False}
    # --deadline reaches the probe: Boulware takes every gain at its last turn, none before
    for flags, gains in (((), 0.0), (("--deadline",), 1.0)):
        r = stratagem(
            "--agent", "strategy:Boulware", "--gft", "2", "--ngft", "0", "-o", "b", *flags
        )
        assert r.returncode == 0, r.stderr
        curves = json.loads((tmp_path / "b/curves.json").read_text())
        assert [c["gain_rate"] for c in curves] == [gains, gains]
    bad = stratagem("--agent", "strategy:NaiveAccepter", "--role", "broker")
    assert bad.returncode == 2 and "--role must be seller, buyer or both" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_command_writes_nothing_when_the_model_cannot_be_reached(tmp_path):
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "stratagem.cli.main", "acceptance", "--agent", "openai:m",
         "--base-url", "http://127.0.0.1:9/v1", "--max-retries", "0", "--gft", "1", "--ngft",
         "0", "-o", "out"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert r.returncode == 1 and "failed" in r.stderr and "nothing written" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()  # no curves, no traces: a rerun starts clean
