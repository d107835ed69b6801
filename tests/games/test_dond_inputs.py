"""A DoND context file as a run's input: named by its content, kept in the run folder, and
``--normalise`` refused where it would change nothing (SPEC §7, §10)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from typer.testing import CliRunner

from stratagem.cli.main import app
from stratagem.errors import ConfigDriftError, ConfigError
from stratagem.games import get_game
from stratagem.games.dond import all_contexts

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def write_contexts(path, contexts) -> None:
    lines = []
    for ctx in contexts:
        for values in ctx.values:
            lines.append(" ".join(f"{n} {v}" for n, v in zip(ctx.counts, values, strict=True)))
    path.write_text("\n".join(lines) + "\n")


def evaluate(out, *extra):
    args = ["eval", "--game", "dond", "--agent", "strategy:FairSplit", "-n", "2"]
    return CliRunner().invoke(app, [*args, "-p", "contexts=ctx.txt", "--out", str(out), *extra])


def test_the_game_names_its_context_file_by_content_and_refuses_another(tmp_path):
    path = tmp_path / "ctx.txt"
    write_contexts(path, all_contexts()[:40])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    game = get_game("dond", contexts=str(path))
    assert game.params["contexts_sha256"] == digest
    assert game.input_files() == {"contexts": str(path)}
    assert get_game("dond", **game.params).params == game.params  # params rebuild the game
    write_contexts(path, all_contexts()[1:41])
    with pytest.raises(ConfigError, match="the context file .* has changed"):
        get_game("dond", **game.params)
    assert "contexts_sha256" not in get_game("dond").params  # no file: the params of before


def test_a_changed_context_file_is_another_run_and_report_needs_only_the_folder(
    tmp_path, monkeypatch
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    write_contexts(work / "ctx.txt", all_contexts()[:40])
    out = tmp_path / "run"
    first = evaluate(out)
    assert first.exit_code == 0, first.output
    traces = (out / "traces.jsonl").read_bytes()
    assert (out / "inputs" / "contexts").read_bytes() == (work / "ctx.txt").read_bytes()
    # regression: the fingerprint held the path only, so the changed file reused every trace
    write_contexts(work / "ctx.txt", all_contexts()[100:140])
    changed = evaluate(out)
    assert isinstance(changed.exception, ConfigDriftError)
    assert "game_params.contexts_sha256:" in " ".join(str(changed.exception).split())
    assert (out / "traces.jsonl").read_bytes() == traces  # nothing reused, nothing written
    metrics = (out / "metrics.csv").read_text()
    # regression: report rebuilt the game from the relative path and failed elsewhere
    (work / "ctx.txt").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (out / "metrics.csv").unlink()
    report = CliRunner().invoke(app, ["report", str(out)])
    assert report.exit_code == 0, report.output
    assert (out / "metrics.csv").read_text() == metrics
    moved = tmp_path / "moved"
    shutil.copytree(out, moved, ignore=shutil.ignore_patterns("run.lock"))
    assert CliRunner().invoke(app, ["report", str(moved)]).exit_code == 0
    manifest = json.loads((out / "run.json").read_text())
    assert (
        manifest["fingerprint"]["game_params"]["contexts_sha256"]
        == hashlib.sha256((out / "inputs" / "contexts").read_bytes()).hexdigest()
    )


def test_normalise_on_dond_is_refused_not_printed_as_done(tmp_path):
    # regression: DoND's metrics are its own, --normalise scaled nothing and printed "yes"
    args = ["eval", "--game", "dond", "--agent", "strategy:FairSplit", "-n", "1", "--normalise"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert isinstance(result.exception, ConfigError)
    assert "no reference payoff" in str(result.exception)
    assert not (tmp_path / "run" / "traces.jsonl").exists()
