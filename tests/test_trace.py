"""Traces: strict JSON, resume by id, torn-line recovery, determinism (RELIABILITY A, D, E)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stratagem.evaluation.pools import evaluate
from stratagem.game import RoundResult
from stratagem.games import get_game
from stratagem.strategies import get_strategy
from stratagem.trace import DecisionRecord, Trace, TraceWriter, read_traces

REPO = Path(__file__).resolve().parents[1]


def tiny_trace(i: int, status="complete", text=None, payoff=1.0) -> Trace:
    return Trace(
        episode_id=f"ep{i}",
        game="ipd",
        version=1,
        seed=i,
        agents=("a", "b"),
        rounds=(RoundResult(0, ((0, "DEFECT"), (1, "COOPERATE")), (payoff, 0.0)),),
        decisions=(DecisionRecord(0, 0, "DEFECT", text=text),),
        status=status,
    )


def test_round_trip():
    t = tiny_trace(3, text="héllo")
    assert Trace.from_json(t.to_json()) == t


def test_strict_json_for_nan_and_lone_surrogates(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        w.write(tiny_trace(0, text="bad \ud800 text", payoff=float("nan")))
    raw = path.read_bytes().decode("utf-8")  # valid UTF-8
    record = json.loads(raw, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert record["rounds"][0]["payoffs"][0] is None
    assert "\ufffd" in record["decisions"][0]["text"]
    import pandas as pd

    assert len(pd.read_json(path, lines=True)) == 1


def test_torn_last_line_is_dropped_with_a_warning(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        for i in range(5):
            w.write(tiny_trace(i))
    data = path.read_bytes()
    cut = len(data) - 17
    path.write_bytes(data[:cut])
    with pytest.warns(UserWarning, match=r"dropped \d+ bytes"):
        w = TraceWriter(path)
    assert w.done == {f"ep{i}" for i in range(4)}
    w.write(tiny_trace(4))
    w.close()
    lines = path.read_text().splitlines()
    assert [json.loads(x)["episode_id"] for x in lines] == [f"ep{i}" for i in range(5)]


def test_error_traces_are_dropped_on_resume_so_they_run_again(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        w.write(tiny_trace(0))
        w.write(tiny_trace(1, status="error"))
    w = TraceWriter(path)
    assert w.done == {"ep0"} and w.dropped_errors == 1
    w.close()
    assert len(read_traces(path)) == 1


def test_same_seed_byte_identical_traces(tmp_path):
    game = get_game("kuhn")
    for name in ("a", "b"):
        evaluate(game, get_strategy("kuhn", "RandomLegal"), episodes=5, seed=3, out=tmp_path / name)
    assert (tmp_path / "a/traces.jsonl").read_bytes() == (tmp_path / "b/traces.jsonl").read_bytes()


def test_global_rng_does_not_change_traces(tmp_path):
    game = get_game("ipd")
    plain = evaluate(game, get_strategy("ipd", "Mixed"), episodes=3).traces
    random.seed(999)
    random.random()
    again = evaluate(game, get_strategy("ipd", "Mixed"), episodes=3).traces
    assert [t.to_json() for t in plain] == [t.to_json() for t in again]


def test_no_global_seeding_in_the_package():
    for path in (REPO / "src").rglob("*.py"):
        text = path.read_text()
        assert "random.seed(" not in text and "np.random.seed(" not in text, path


def _eval_cmd(out: Path, episodes: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "stratagem.cli.main",
        "eval",
        "--game",
        "ipd",
        "--agent",
        "strategy:Mixed",
        "--episodes",
        str(episodes),
        "--out",
        str(out),
    ]


def test_sigkill_and_resume_leaves_every_episode_exactly_once(tmp_path):
    episodes = 300  # 11 opponents × 300 = 3,300 episodes
    out = tmp_path / "killed"
    traces = out / "traces.jsonl"
    for _ in range(3):
        proc = subprocess.Popen(
            _eval_cmd(out, episodes), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        before = traces.stat().st_size if traces.exists() else 0
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            if traces.exists() and traces.stat().st_size > before + 20_000:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    lines_before = len(traces.read_text().splitlines()) if traces.exists() else 0
    assert 0 < lines_before < 3300, "the kills happened partway"
    subprocess.run(_eval_cmd(out, episodes), check=True, stdout=subprocess.DEVNULL)
    ids = [json.loads(x)["episode_id"] for x in traces.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 3300
    # the same episodes as an uninterrupted run, byte for byte (order aside)
    clean = tmp_path / "clean"
    subprocess.run(_eval_cmd(clean, episodes), check=True, stdout=subprocess.DEVNULL)
    assert sorted(traces.read_text().splitlines()) == sorted(
        (clean / "traces.jsonl").read_text().splitlines()
    )
    assert (out / "metrics.csv").read_text() == (clean / "metrics.csv").read_text()


def test_config_drift_is_refused_and_touches_nothing(tmp_path):
    out = tmp_path / "run"
    subprocess.run(_eval_cmd(out, 2), check=True, stdout=subprocess.DEVNULL)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    result = subprocess.run(_eval_cmd(out, 3), capture_output=True, text=True)
    assert result.returncode == 2
    assert "episodes: 2 -> 3" in result.stderr and "Traceback" not in result.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_rerun_of_a_finished_run_plays_nothing(tmp_path):
    out = tmp_path / "run"
    subprocess.run(_eval_cmd(out, 2), check=True, stdout=subprocess.DEVNULL)
    first = (out / "traces.jsonl").read_bytes()
    subprocess.run(_eval_cmd(out, 2), check=True, stdout=subprocess.DEVNULL)
    assert (out / "traces.jsonl").read_bytes() == first


def test_record_larger_than_a_megabyte_torn_mid_write(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        w.write(tiny_trace(0))
        w.write(tiny_trace(1, text="x" * 1_500_000))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 700_000])  # killed halfway through the big record
    with pytest.warns(UserWarning, match="dropped"):
        w = TraceWriter(path)
    assert w.done == {"ep0"}
    w.close()
    assert [json.loads(x)["episode_id"] for x in path.read_text().splitlines()] == ["ep0"]


def test_runtime_settings_may_change_on_resume(tmp_path):
    out = tmp_path / "run"
    subprocess.run(_eval_cmd(out, 2), check=True, stdout=subprocess.DEVNULL)
    again = subprocess.run(
        _eval_cmd(out, 2) + ["--max-batch", "8", "--concurrency", "3"],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr


def test_every_line_of_a_run_follows_the_schema(tmp_path):
    import pydantic

    from stratagem.trace import validate_line

    for game, agent in [("kuhn", "TightValue"), ("multi_issue", "Adaptive"), ("auction", "Random")]:
        evaluate(get_game(game), get_strategy(game, agent), episodes=2, out=tmp_path / game)
        for line in (tmp_path / game / "traces.jsonl").read_text().splitlines():
            validate_line(line)
    record = json.loads(line)
    record["unexpected"] = 1
    with pytest.raises(pydantic.ValidationError):
        validate_line(json.dumps(record))


def test_v1_run_folders_still_report(tmp_path):
    """Trace schema v2 adds params, system prompts and attempts; a v1 folder (none of them, and
    ``kuhn_policy.json``) is still read by ``report``, with the same metrics."""
    import json

    from typer.testing import CliRunner

    from stratagem.cli.main import app

    run = tmp_path / "v2"
    result = evaluate(get_game("kuhn"), get_strategy("kuhn", "NashApprox"), episodes=2, out=run)
    old = tmp_path / "v1"
    old.mkdir()
    lines = []
    for line in (run / "traces.jsonl").read_text().splitlines():
        record = json.loads(line)
        for key in ("params", "system"):
            del record[key]
        for d in record["decisions"]:
            del d["attempt"]
        record["schema_version"] = 1
        lines.append(json.dumps(record))
    (old / "traces.jsonl").write_text("\n".join(lines) + "\n")
    manifest = json.loads((run / "run.json").read_text())
    del manifest["fingerprint"]["game_params"]
    (old / "run.json").write_text(json.dumps(manifest))
    (old / "kuhn_policy.json").write_text((run / "policy.json").read_text())
    out = CliRunner().invoke(app, ["report", str(old)])
    assert out.exit_code == 0, out.output
    assert (old / "metrics.csv").read_text() == (run / "metrics.csv").read_text()
    assert result.exact_exploitability is not None
