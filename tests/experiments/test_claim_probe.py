"""The claim probe: the drills' own rules answer as the rule in every probe; a seat that accepts
everything deals wherever the rule counter-claims; refused and failed answers are never read as
a decision."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from experiments.claim_probe.__main__ import _table
from experiments.claim_probe.probe import claim_probe, read_answer
from experiments.drills.dond import DrillPartner, JointDrillPartner, RefusingDrillPartner
from experiments.drills.dond.checks import CheckSteps, joint_steps, refusal_steps
from stratagem.agent import Decision, Strategy
from stratagem.errors import ConfigError
from stratagem.games import get_game
from stratagem.games.dond import Context, Invalid, Propose, split_contexts
from stratagem.strategies.dond.talk import claim_text, deal_text

ROOT = Path(__file__).resolve().parents[2]
N = 40


def test_the_joint_rule_answers_as_itself_and_keeps_a_joint_best_share_every_time():
    probe = claim_probe(JointDrillPartner(), "joint", N, seed=3)
    counts = probe.counts()
    assert probe.agreement() == (1.0, 0.0)
    assert counts["deal"]["deal"] + counts["counter"]["counter"] == N
    assert counts["counter"]["counter"] > N // 2  # a random claim is rarely joint-best
    assert probe.counters_as_rule() == (counts["counter"]["counter"],) * 2
    assert probe.joint_best() == (N, N)
    assert sum(a.checked for a in probe.answers) == 0  # no check without --drills-check
    # a random share is joint-best about one time in ten: the rate a guessing seat would have
    assert 0.05 < probe.chance() < 0.2
    assert all(0 < a.chance <= 1 for a in probe.answers)  # 1 where both value alike


def test_the_checked_joint_rule_writes_its_check_before_every_answer():
    probe = claim_probe(JointDrillPartner(check=True), "joint", N, seed=3)
    assert probe.agreement() == (1.0, 0.0)
    assert sum(a.checked for a in probe.answers) == N


def test_the_refusal_rule_answers_as_itself():
    probe = claim_probe(RefusingDrillPartner(), "refuse", N, seed=5)
    assert probe.agreement() == (1.0, 0.0)
    as_rule, counters = probe.counters_as_rule()
    assert as_rule == counters > 0
    assert sum(a.checked for a in probe.answers) == 0
    checked = claim_probe(RefusingDrillPartner(check=True), "refuse", N, seed=5)
    assert checked.agreement() == (1.0, 0.0)
    assert sum(a.checked for a in checked.answers) == N


def test_a_seat_that_accepts_everything_deals_wherever_the_rule_counter_claims():
    rule = claim_probe(RefusingDrillPartner(), "refuse", N, seed=5)
    naive = claim_probe(DrillPartner(), "refuse", N, seed=5)
    refusals = rule.counts()["counter"]["counter"]
    assert naive.counts()["counter"] == {"deal": refusals}
    assert naive.counts()["deal"] == {"deal": N - refusals}
    assert naive.agreement()[0] == pytest.approx((N - refusals) / N)
    assert naive.counters_as_rule() == (0, 0)


def test_probes_use_held_out_contexts_with_the_drill_claimant_speaking_first():
    probe = claim_probe(JointDrillPartner(), "joint", 12, seed=9)
    held_out = set(split_contexts(get_game("dond").contexts, 9).held_out)
    for trace in probe.traces:
        assert Context.from_dict(trace.scenario) in held_out
        claimant = trace.decisions[0].seat
        assert trace.agents[claimant] == "DrillPartner"
        assert [d.seat for d in trace.decisions] == [claimant, 1 - claimant]  # stops there
        assert trace.meta["rule"] in ("deal", "counter") and len(trace.meta["rule_share"]) == 3


class Garbled:
    """Every answer is refused by the game."""

    name = "garbled"

    def act(self, batch):
        return [Decision(Invalid("no action found"), text="???") for _ in batch]


class Failing:
    """Every model call gives up."""

    name = "failing"

    def act(self, batch):
        return [Decision(Invalid("no answer"), error="timeout: no reply in 60 s") for _ in batch]


@dataclass(frozen=True)
class Proposer(Strategy):
    """Proposes to keep nothing at once."""

    game = "dond"

    def choose(self, view, rng):
        return Propose((0, 0, 0))


def test_refused_answers_are_asked_again_and_an_aborted_probe_reads_other():
    probe = claim_probe(Garbled(), "refuse", 6, seed=1)
    assert [a.answer for a in probe.answers] == ["other"] * 6
    assert [a.corrections for a in probe.answers] == [5] * 6  # five refusals abort a game
    assert probe.agreement() == (0.0, 0.0)


def test_a_failed_model_call_is_never_read_as_an_answer():
    probe = claim_probe(Failing(), "joint", 4, seed=1)
    assert probe.answers == () and probe.errors == ("timeout: no reply in 60 s",) * 4
    assert math.isnan(probe.agreement()[0])


def test_a_proposal_is_read_as_a_proposal():
    probe = claim_probe(Proposer(), "joint", 4, seed=1)
    assert [a.answer for a in probe.answers] == ["proposal"] * 4


def test_answers_are_read_as_the_negotiators_read_them():
    counts, claim = (2, 2, 1), (1, 2, 0)
    assert read_answer(deal_text(claim, (1, 0, 1)), claim, counts) == ("deal", (1, 0, 1))
    assert read_answer(deal_text((0, 2, 0), (2, 0, 1)), claim, counts) == ("other", None)
    assert read_answer(claim_text((2, 0, 1), (0, 2, 0), 1), claim, counts) == ("counter", (2, 0, 1))
    assert read_answer(claim_text((3, 0, 1), (0, 2, 0)), claim, counts) == ("other", None)
    assert read_answer("Sounds good to me!", claim, counts) == ("other", None)


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="kind"):
        claim_probe(JointDrillPartner(), "coop", 4)
    with pytest.raises(ConfigError, match="at least one"):
        claim_probe(JointDrillPartner(), "joint", 0)


def _stratagem(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-m", "experiments.claim_probe", *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # experiments/ runs from a checkout
    )  # fmt: skip


def test_the_command_writes_the_probes_and_refuses_a_bad_kind(tmp_path):
    r = _stratagem(tmp_path, "--agent", "strategy:Cooperative", "--probes", "8", "-o", "out")
    assert r.returncode == 0, r.stderr
    rows = json.loads((tmp_path / "out/probes.json").read_text())
    assert [(row["kind"], row["probes"], row["failed"]) for row in rows] == [
        ("refuse", 8, 0),
        ("joint", 8, 0),
    ]
    assert rows[1]["joint_best"] == rows[1]["kept_shares"] == 8  # λ = 1: it keeps joint-best
    assert (tmp_path / "out/probes.png").stat().st_size > 0
    traces = [json.loads(line) for line in (tmp_path / "out/traces.jsonl").open()]
    assert [t["meta"]["probe"] for t in traces] == ["refuse"] * 8 + ["joint"] * 8
    bad = _stratagem(tmp_path, "--agent", "strategy:Cooperative", "--kind", "coop")
    assert bad.returncode == 2 and "--kind must be" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_command_writes_nothing_when_the_model_cannot_be_reached(tmp_path):
    r = _stratagem(
        tmp_path, "--agent", "openai:m", "--base-url", "http://127.0.0.1:9/v1",
        "--max-retries", "0", "--probes", "2", "-o", "out",
    )  # fmt: skip
    assert r.returncode == 1 and "failed" in r.stderr and "nothing written" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("partner", "kind"),
    [(JointDrillPartner(check=True), "joint"), (RefusingDrillPartner(check=True), "refuse")],
)
def test_the_rules_own_checks_are_right_at_every_step(partner, kind):
    steps = claim_probe(partner, kind, N, seed=3).steps()
    per_answer = 3 if kind == "joint" else 1  # a joint check has one clause per item type
    assert steps.copied == steps.compared == (N * per_answer,) * 2
    parts = (steps.named, steps.valued, steps.counted)
    assert parts == (((N, N),) * 3 if kind == "refuse" else ((0, 0),) * 3)
    caption = str(_table(claim_probe(partner, kind, N, seed=3)).caption)
    assert f"copied {N * per_answer} of {N * per_answer}" in caption
    assert (f"best item named {N}, its value {N}, units left of it {N}" in caption) == (
        kind == "refuse"
    )
    right, scored = steps.followed
    assert right == scored > N // 2  # items marked mine/yours in a kept share; every refusal check


def test_each_step_of_a_check_is_scored_against_what_was_written_before_it():
    values, stated, counts = (3, 0, 2), (0, 5, 1), (2, 2, 2)
    right = "Books: 3 to me, 0 to you, so mine. Hats: 0 to me, 5 to you, so yours. "
    assert joint_steps(right + "Balls: 2 to me, 1 to you, so mine.", values, stated, counts,
                       (2, 0, 2)) == CheckSteps((3, 3), (3, 3), (3, 3))  # fmt: skip
    # a miscopied value whose word fits it; a word that does not fit; a share that ignores a word
    wrong = "Books: 3 to me, 4 to you, so yours. Hats: 0 to me, 5 to you, so mine. "
    assert joint_steps(wrong + "Balls: 2 to me, 1 to you, so mine.", values, stated, counts,
                       (0, 2, 0)) == CheckSteps((2, 3), (2, 3), (2, 3))  # fmt: skip
    assert joint_steps("Deal.", values, stated, counts, None) == CheckSteps()
    # refusal: best item hats (5 each), the claim leaves it 1 hat; the copy's parts after the
    # three steps: the best named, its value, the units left of it
    one, zero = (1, 1), (0, 1)
    assert refusal_steps("My best: hats, 5 each. Left to me: 1, so I deal. Deal: …", (0, 5, 0),
                         (1, 1, 0), dealt=True) == CheckSteps(*(one,) * 6)  # fmt: skip
    wrong = "My best: books, 5 each. Left to me: 1, so I refuse. You get …"
    # books named, 5 is not a book's value, 1 book is left: only the count fits what it named
    assert refusal_steps(wrong, (0, 5, 0), (1, 1, 0), dealt=True) == CheckSteps(
        zero, zero, zero, zero, zero, one
    )
    tied = "My best: books and hats, 4 each. Left to me: 0, so I refuse."
    assert refusal_steps(tied, (4, 4, 1), (0, 0, 2), dealt=False) == CheckSteps(*(one,) * 6)
    # the second-best item named with its own value and its own count: only the naming is wrong
    near = "My best: balls, 1 each. Left to me: 2, so I deal."
    assert refusal_steps(near, (4, 4, 1), (0, 0, 2), dealt=True) == CheckSteps(
        zero, one, one, zero, one, one
    )
    total = sum([CheckSteps(*(one,) * 6), CheckSteps(zero, one, one, zero, one, one)], CheckSteps())
    assert total == CheckSteps((1, 2), (2, 2), (2, 2), (1, 2), (2, 2), (2, 2))


@pytest.mark.slow
def test_the_embedded_model_answers_every_probe_in_batched_calls():
    from stratagem.agents.spec import LLMOptions, make_agent

    game = get_game("dond")
    agent = make_agent("hf", game, LLMOptions(max_new_tokens=24, temperature=0.0))
    probe = claim_probe(agent, "joint", 3, seed=42)
    assert len(probe.answers) == 3 and probe.errors == ()
    for answer, trace in zip(probe.answers, probe.traces, strict=True):
        assert 0 <= answer.corrections <= 5  # five refused answers abort the probe's game
        model_turns = [d for d in trace.decisions if d.seat != trace.decisions[0].seat]
        # every refused answer, then the one read (none read when five refusals abort)
        assert len(model_turns) in (answer.corrections, answer.corrections + 1) and model_turns
        assert all(d.text for d in model_turns)  # the model's own words are kept
