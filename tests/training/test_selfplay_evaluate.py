"""``stratagem selfplay-eval``: a self-play run's checkpoints played again on more held-out games —
the run's own games reused and reproduced, paired changes exact, bad inputs refused in one line."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.games.dond import all_contexts, joint_values
from stratagem.metrics.paired import PairingError
from stratagem.trace import RoundResult, Trace, read_traces, write_traces
from stratagem.training.selfplay import evaluate as selfplay_evaluate
from stratagem.training.selfplay.evaluate import (
    check_written,
    evaluate_checkpoints,
    run_settings,
    seed_from_run,
)
from stratagem.training.selfplay.pairing import (
    CheckpointEvaluation,
    paired_change,
    paired_changes,
    summary_markdown,
)
from stratagem.training.selfplay.trainer import train_selfplay
from tests.training.test_selfplay import result_trace, steered, tiny_settings  # noqa: F401
from tests.training.test_selfplay_contexts import write_context_file

CONTEXT = all_contexts()[0]
JOINT = joint_values(CONTEXT.counts, CONTEXT.values)
BEST = max(JOINT, key=JOINT.__getitem__)  # seat 0's share in a joint-best division
WORSE = min(JOINT, key=JOINT.__getitem__)


def game(
    index: int,
    payoffs,
    phase: str = "selfplay",
    seat: int = 0,
    status="complete",
    best: bool = False,
    context=CONTEXT,
) -> Trace:
    """A finished game at ``index``: agreed when seat 0 scored, joint-best when ``best``."""
    trace = result_trace(f"key/1/{phase}/{index}", payoffs, payoffs[0] > 0, status, context)
    info = dict(trace.rounds[0].info)
    share = BEST if best else WORSE
    info["proposals"] = [list(share), [n - x for n, x in zip(CONTEXT.counts, share, strict=True)]]
    return dataclasses.replace(
        trace,
        meta={"phase": phase, "index": index, "seat": seat},
        rounds=(RoundResult(0, (), payoffs, info),),
    )


def test_the_paired_change_is_the_mean_of_each_games_difference():
    before = [game(0, (6.0, 4.0)), game(1, (0.0, 0.0)), game(2, (8.0, 8.0))]
    after = [game(2, (9.0, 9.0)), game(0, (5.0, 5.0)), game(1, (7.0, 9.0))]  # any order
    change = paired_change(before, after, "selfplay")
    # per game (mean of both seats): 0 → 0, +8, +1
    assert change.n == 3 and change.value == pytest.approx(3.0)
    assert change.stderr == pytest.approx((((-3) ** 2 + 5**2 + (-2) ** 2) / 2 / 3) ** 0.5)
    # against the fixed agent only the policy's seat counts
    fixed_before = [game(0, (6.0, 2.0), "fixed", seat=0), game(1, (3.0, 10.0), "fixed", seat=1)]
    fixed_after = [game(0, (7.0, 0.0), "fixed", seat=0), game(1, (0.0, 4.0), "fixed", seat=1)]
    assert paired_change(fixed_before, fixed_after, "fixed").value == pytest.approx(-2.5)
    # a game that errored on either side is left out of the pairs
    errored = [game(0, (0.0, 0.0), status="error"), game(1, (3.0, 3.0)), game(2, (8.0, 8.0))]
    assert paired_change(before, errored, "selfplay").n == 2


def test_a_paired_change_refuses_sides_that_played_other_games():
    other = all_contexts()[7]
    before = [game(k, (5.0, 5.0)) for k in range(4)]
    after = [game(k, (6.0, 6.0), context=other if k == 2 else CONTEXT) for k in range(4)]
    with pytest.raises(PairingError) as e:
        paired_change(before, after, "selfplay")
    assert str(e.value).startswith(
        f"not paired: game 2 is '#2 seed 0 context {CONTEXT.id}' in the first checkpoint's "
        f"games and '#2 seed 0 context {other.id}' in the other's (4 and 4 games)"
    )
    reseeded = [dataclasses.replace(t, seed=9) if k == 3 else t for k, t in enumerate(before)]
    with pytest.raises(
        PairingError, match="game 3 is '#3 seed 9 .* first .* '#3 seed 0 .* other's"
    ):
        paired_changes(reseeded, before, "selfplay")


def test_paired_changes_give_mcnemar_on_joint_best_and_agreement_and_a_bootstrap_interval():
    # games 0-5: joint-best 2 gained (0, 1), 1 lost (2); agreement 1 gained (3), 1 lost (4)
    before = [
        game(0, (5.0, 5.0)),
        game(1, (6.0, 4.0)),
        game(2, (9.0, 9.0), best=True),
        game(3, (0.0, 0.0)),
        game(4, (7.0, 3.0)),
        game(5, (4.0, 4.0), best=True),
    ]
    after = [
        game(0, (9.0, 9.0), best=True),
        game(1, (8.0, 8.0), best=True),
        game(2, (5.0, 5.0)),
        game(3, (6.0, 2.0)),
        game(4, (0.0, 0.0)),
        game(5, (4.0, 4.0), best=True),
    ]
    changes = paired_changes(before, after, "selfplay")
    assert changes is not None
    jb, agreed = changes.joint_best, changes.agreement
    assert (jb.gained, jb.lost, jb.p) == (2, 1, 1.0) and jb.change.value == pytest.approx(1 / 6)
    assert (agreed.gained, agreed.lost, agreed.p) == (1, 1, 1.0) and agreed.change.value == 0
    # per game (mean of both seats): +4, +3, -4, +4, -5, 0
    assert changes.score.change.value == pytest.approx(2 / 6) and changes.score.change.n == 6
    assert changes.score.low < 2 / 6 < changes.score.high
    evaluation = CheckpointEvaluation(4, "selfplay", {}, changes, redrawn=3)
    row = evaluation.row()
    assert row["redrawn_games"] == 3
    assert row["paired_joint_best"]["mcnemar"] == {"gained": 2, "lost": 1, "p": 1.0}
    assert row["paired_score_bootstrap_95"] == [changes.score.low, changes.score.high]
    assert evaluation.joint_best_text() == "+0.167 (2 vs 1, p 1.00)"
    assert paired_changes(before[:1], [game(0, (1.0, 1.0), status="error")], "selfplay") is None


def test_the_summary_says_how_many_games_were_drawn_again():
    from stratagem.metrics.estimate import Estimate

    names = ("score", "agreement_rate", "pareto_rate", "joint_best_rate")
    metrics = {name: Estimate(5.0 if name == "score" else 1.0, 0.0, 3) for name in names}
    first = CheckpointEvaluation(0, "selfplay", metrics, None, 2)
    fixed = CheckpointEvaluation(0, "fixed", metrics, None, 1)
    text = summary_markdown([first, fixed], 3)
    assert text.endswith(
        "Re-drawn off the run's selection contexts: selfplay 2 of 3, fixed 1 of 3.\n"
    )
    assert (
        "| selfplay | 0 | 3 | 5.00 ± 0.00 | — | 1.00 ± 0.00 | 1.00 ± 0.00 | 1.00 ± 0.00 | — | 0 |"
        in text
    )


def test_games_written_on_other_contexts_than_drawn_now_are_refused(tmp_path):
    from stratagem.episode import EpisodeSpec

    other = all_contexts()[7]
    specs = [
        EpisodeSpec(f"1/selfplay/{k}", 0, (None, None), {"index": k}, CONTEXT) for k in range(3)
    ]  # type: ignore[arg-type]
    path = tmp_path / "selfplay" / "iteration-1.jsonl"
    check_written(path, specs)  # nothing written yet
    path.parent.mkdir()
    write_traces(path, [game(0, (5.0, 5.0)), game(1, (5.0, 5.0), context=other)])
    with pytest.raises(ConfigError, match=f"game 1 was played with seed 0 on context {other.id}"):
        check_written(path, specs)
    write_traces(path, [game(0, (5.0, 5.0)), game(1, (5.0, 5.0), status="error", context=other)])
    check_written(path, specs)  # an errored game is played again anyway


def test_seeding_copies_the_runs_own_games_of_the_phase_and_never_overwrites(tmp_path):
    run = tmp_path / "run"
    own = [game(0, (5.0, 5.0)), game(0, (4.0, 0.0), "fixed"), game(1, (1.0, 1.0))]
    (run / "traces").mkdir(parents=True)
    write_traces(run / "traces" / "iteration-1.jsonl", own)
    target = tmp_path / "eval" / "selfplay" / "iteration-1.jsonl"
    assert seed_from_run(run, 1, "selfplay", target) == 2
    assert [t.meta["index"] for t in read_traces(target)] == [0, 1]
    assert seed_from_run(run, 1, "selfplay", target) == 0  # a rerun keeps what was played
    assert seed_from_run(run, 7, "fixed", tmp_path / "none.jsonl") == 0  # no traces: none
    assert not list(tmp_path.rglob("*.partial"))


def test_bad_runs_and_checkpoints_are_refused_before_any_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "stratagem.training.policy.load_policy", lambda *a: pytest.fail("loaded a model")
    )
    with pytest.raises(ConfigError, match="no readable run.json"):
        evaluate_checkpoints(tmp_path / "missing", [0], 10)
    sepo = tmp_path / "sepo"
    sepo.mkdir()
    (sepo / "run.json").write_text(json.dumps({"fingerprint": {"game": "kuhn", "steps": 5}}))
    with pytest.raises(ConfigError, match="not a run of `stratagem train selfplay`"):
        evaluate_checkpoints(sepo, [0], 10)
    run = tmp_path / "run"
    run.mkdir()
    fingerprint = tiny_settings("embedded", run).fingerprint()
    (run / "run.json").write_text(json.dumps({"fingerprint": fingerprint, "key": "k"}))
    (run / "checkpoint-0").mkdir()
    (run / "checkpoint-0" / "COMPLETE").touch()
    (run / "checkpoint-1").mkdir()  # killed before it was complete
    with pytest.raises(ConfigError, match=r"no complete checkpoint-1 \(complete: 0\)"):
        evaluate_checkpoints(run, [0, 1], 10)
    with pytest.raises(ConfigError, match="--games"):
        evaluate_checkpoints(run, [0], 0)
    with pytest.raises(ConfigError, match="--phases: both"):
        evaluate_checkpoints(run, [0], 5, phases=["both"])
    with pytest.raises(UnknownNameError, match="Cooprative"):
        evaluate_checkpoints(run, [0], 5, opponent="Cooprative")
    assert run_settings(run, 40).eval_games == 40


def test_a_run_whose_inputs_moved_or_changed_is_refused(tmp_path):
    contexts = tmp_path / "contexts.txt"
    write_context_file(contexts, all_contexts()[::97])
    run = tmp_path / "run"
    run.mkdir()
    fingerprint = tiny_settings("embedded", run, contexts=contexts).fingerprint()
    (run / "run.json").write_text(json.dumps({"fingerprint": fingerprint, "key": "k"}))
    assert run_settings(run, 5).contexts == contexts
    write_context_file(contexts, all_contexts()[::89])
    with pytest.raises(ConfigError, match="changed since"):
        run_settings(run, 5)
    contexts.unlink()
    with pytest.raises(ConfigError, match="which is gone"):
        run_settings(run, 5)
    fingerprint.update(contexts=None, adapter=str(tmp_path / "sft/checkpoint-40"))
    (run / "run.json").write_text(json.dumps({"fingerprint": fingerprint, "key": "k"}))
    with pytest.raises(ConfigError, match="no such adapter folder"):
        run_settings(run, 5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--checkpoints", "0,two"], "--checkpoints: whole numbers"),
        (["--checkpoints", "1,1"], "each checkpoint once"),
        (["--games", "0"], "games"),
        ([], "no readable run.json"),
    ],
)
def test_the_command_refuses_bad_input_in_one_line(tmp_path, args, message):
    command = [sys.executable, "-m", "stratagem.cli.main", "selfplay-eval", str(tmp_path), *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 or "Usage" in result.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("steered")
def test_a_reloaded_checkpoint_replays_the_runs_games_and_plays_more(
    tiny_model, tmp_path, monkeypatch
):
    run = tmp_path / "run"
    # a step large enough that iteration 1's policy plays other games than the start's
    settings = tiny_settings(tiny_model, run, iterations=1, eval_games=2, learning_rate=5e-2)
    train_selfplay(settings, log=lambda _: None)

    results = evaluate_checkpoints(run, [0, 1], 3, log=lambda _: None)
    out = run / "evaluation-3"
    for phase in ("selfplay", "fixed"):
        own = [t for t in read_traces(run / "traces/iteration-1.jsonl") if t.meta["phase"] == phase]
        games = read_traces(out / phase / "iteration-1.jsonl")
        assert [t.meta["index"] for t in games] == [0, 1, 2]
        assert [t.to_json() for t in games[:2]] == [t.to_json() for t in own]  # copied
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["phase"], r["checkpoint"]) for r in summary] == [
        ("selfplay", 0),
        ("selfplay", 1),
        ("fixed", 0),
        ("fixed", 1),
    ]
    assert summary[0]["paired_score_change"] is None
    expected = paired_change(
        read_traces(out / "selfplay/iteration-0.jsonl"),
        read_traces(out / "selfplay/iteration-1.jsonl"),
        "selfplay",
    )
    assert results[1].paired == expected and summary[1]["paired_score_change"][2] == 3
    assert [r["redrawn_games"] for r in summary] == [0] * 4  # a run without --select-games
    assert (
        summary[1]["paired_joint_best"]["change"][2] == 3 and summary[0]["paired_agreement"] is None
    )
    assert summary[1]["score"][2] == 3 and (out / "summary.md").read_text().count("\n") == 2 + 4 + 2

    # against an agent the run never played: the same games (contexts, seeds, seats), all played
    evaluate_checkpoints(run, [0, 1], 3, ["fixed"], lambda _: None, opponent="Cooperative")
    for k in (0, 1):
        own = read_traces(out / "fixed" / f"iteration-{k}.jsonl")
        other = read_traces(out / "fixed-Cooperative" / f"iteration-{k}.jsonl")
        assert [(t.meta["index"], t.seed, t.scenario) for t in sorted(other, key=index)] == [
            (t.meta["index"], t.seed, t.scenario) for t in sorted(own, key=index)
        ]
        assert {t.agents[1 - t.meta["seat"]] for t in other} == {"Cooperative"}
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["phase"], r["checkpoint"]) for r in summary] == [
        ("fixed-Cooperative", 0),
        ("fixed-Cooperative", 1),
    ]

    # played afresh instead of copied, the run's games come out token for token the same
    monkeypatch.setattr(selfplay_evaluate, "seed_from_run", lambda *a: 0)
    twice = evaluate_checkpoints(run, [1], 2, phases=["selfplay", "selfplay"], log=lambda _: None)
    assert [(r.phase, r.checkpoint) for r in twice] == [("selfplay", 1)]  # named twice, played once
    replayed = read_traces(run / "evaluation-2/selfplay/iteration-1.jsonl")
    own = [
        t for t in read_traces(run / "traces/iteration-1.jsonl") if t.meta["phase"] == "selfplay"
    ]
    start = read_traces(run / "traces/iteration-0.jsonl")
    start = [t for t in start if t.meta["phase"] == "selfplay"]
    assert texts(replayed) == texts(own) != texts(start)


def index(trace: Trace) -> int:
    return trace.meta["index"]


def texts(traces) -> list[list[str]]:
    """Every decision's text, game by game in index order."""
    return [[d.text for d in t.decisions] for t in sorted(traces, key=lambda t: t.meta["index"])]
