"""``stratagem solve`` on dialogue games with the scripted backend (mounted on a local app)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from stratagem.backends.scripted import ScriptedBackend
from stratagem.cli.main import app
from stratagem.errors import ConfigError
from stratagem.solvers.dialogue import setup as dialogue_setup


def fruit_script(chat):
    first = chat[0]["content"]
    if first.startswith("You label"):
        return "calm"
    if first.startswith("You score"):
        return "VALUE: 1"
    if "assertive" in chat[-1]["content"]:
        return "No way.\nREJECT"
    if "calm" in chat[-1]["content"]:
        return "Fine.\nACCEPT"
    return "Let me think."


def run(monkeypatch, *args, script=fruit_script):
    backend = ScriptedBackend(script)
    monkeypatch.setattr(dialogue_setup, "make_backend", lambda opts: backend)
    return CliRunner().invoke(app, ["solve", *args]), backend


def test_solve_fruit_writes_trees_policy_metrics_and_tables(monkeypatch, tmp_path):
    out = tmp_path / "fruit"
    args = [
        "--game",
        "fruit",
        "--instructions",
        "calm,assertive,any",
        "--scenarios",
        "2",
        "--replies",
        "2",
        "--seeds",
        "1",
        "--iterations",
        "200",
        "--cache",
        str(tmp_path / "c.sqlite"),
        "--steering",
        "2",
        "--judge",
        "2",
        "--out",
        str(out),
    ]
    result, backend = run(monkeypatch, *args)
    assert result.exit_code == 0, result.output
    assert backend.calls[:2] == [6, 6]  # 2 scenarios × 3 instructions, then 2 × 1 live × 3
    expansion = json.loads((out / "expansion.json").read_text())
    assert expansion["model_calls"] == 2 and expansion["trees"] == 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["solved"] == 2 and summary["failed"] == []
    assert set(summary["cfr_gain"]) == {"mean", "std", "stderr", "n"}
    policy = json.loads((out / "policy.json").read_text())
    first = next(iter(policy.values()))
    assert first[0]["seat"] == 1 and set(first[0]["policy"]) == {"calm", "assertive", "any"}
    assert (out / "metrics.csv").read_text().startswith("scenario,cfr_gain_0")
    assert (out / "table.md").read_text().count("|") > 20
    assert (out / "metrics.png").exists() and (out / "exploitability.png").exists()
    assert sum(1 for _ in (out / "dialogues.jsonl").open()) == expansion["terminal"]
    assert "| overall |" in (out / "steering.md").read_text()
    assert "| all |" in (out / "judge.md").read_text()
    # a second solve on the warm cache makes no message calls
    result, again = run(monkeypatch, *args[:-1], str(tmp_path / "again"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "again" / "expansion.json").read_text())["model_calls"] == 0
    assert again.calls == []


def test_dialogue_settings_are_refused_for_poker(monkeypatch, tmp_path):
    result, _ = run(monkeypatch, "--game", "kuhn", "--replies", "3", "--out", str(tmp_path))
    assert isinstance(result.exception, ConfigError)
    assert "replies" in str(result.exception)
    result, _ = run(monkeypatch, "--game", "fruti", "--out", str(tmp_path))
    assert "did you mean 'fruit'" in str(result.exception)
