"""A failed generation is never cached and never a payoff; a run's settings are checked before
its first model call (``solve``, ``psro``, ``imitate`` on dialogue games)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stratagem.backends.base import Generation
from stratagem.backends.cache import CachedBackend, ResponseCache
from stratagem.backends.scripted import ScriptedBackend
from stratagem.cli.main import app
from stratagem.errors import ConfigError
from stratagem.games.dialogue import get_domain
from stratagem.solvers.dialogue import (
    DialogueTree,
    GenerationFailure,
    UnsolvedScenarios,
    expand,
    failed_scenarios,
)
from stratagem.solvers.dialogue import setup as dialogue_setup
from stratagem.training import imitation

from ..backends.fault_server import FaultServer
from .test_imitation import fake_embed

SRC = str(Path(__file__).resolve().parents[2] / "src")


class Flaky(ScriptedBackend):
    """Answers ``script`` while ``up``, else fails every row as a dead endpoint does."""

    def __init__(self, script, up: bool = True):
        super().__init__(script)
        self.up = up

    def generate(self, chats, sampling, *, seeds=None, stop=None):
        if self.up:
            return super().generate(chats, sampling, seeds=seeds, stop=stop)
        self.calls.append(len(chats))
        error = {"error": "connection refused"}
        return [Generation("", finish_reason="error", info=error) for _ in chats]


def accept(chat):
    return "Fine.\nACCEPT" if "calm" in chat[-1]["content"] else "Hmm, no."


def stored_texts(path) -> list[str]:
    cache = ResponseCache(path)
    rows = cache._db.execute("SELECT value FROM responses").fetchall()
    cache.close()
    return [json.loads(v)["text"] for (v,) in rows if "text" in json.loads(v)]


def test_a_failed_generation_is_returned_and_never_cached(tmp_path):
    backend = Flaky(accept, up=False)
    cached = CachedBackend(backend, tmp_path / "c.sqlite")
    chat = [{"role": "user", "content": "calm"}]
    (gen,) = cached.generate([chat], dialogue_setup.sampling_of(_Opts()), seeds=[1])
    assert gen.finish_reason == "error" and cached.usage.failed == 1
    assert len(cached.cache) == 0 and cached.memory == {}
    backend.up = True
    (gen,) = cached.generate([chat], dialogue_setup.sampling_of(_Opts()), seeds=[1])
    assert gen.text == "Fine.\nACCEPT" and backend.calls == [1, 1]  # asked again
    assert len(cached.cache) == 1


class _Opts:
    temperature = top_p = max_new_tokens = None


def test_the_tree_records_a_failed_generation_without_a_payoff():
    domain = get_domain("fruit", ("calm", "assertive", "any"))
    backend = Flaky(accept, up=False)
    tree = DialogueTree(domain, domain.scenario(0), CachedBackend(backend), seeds=1)
    stats = expand([tree])
    assert stats.generation_failures == 3 and tree.outcomes
    assert all(o.source == "error" and o.values is None for o in tree.outcomes.values())
    assert "connection refused" in failed_scenarios([tree])["fruit-0"]
    leaf = tree.root.child("calm").child("seed0")
    with pytest.raises(GenerationFailure, match="connection refused"):
        leaf.returns()
    rows = list(tree.dialogues())
    assert rows and all(r["payoffs"] is None and "error" in r for r in rows)


def solve_args(tmp_path, *extra):
    return [
        "solve",
        "--game",
        "fruit",
        "--instructions",
        "calm,assertive,any",
        "--scenarios",
        "2",
        "--seeds",
        "1",
        "--iterations",
        "50",
        "--cache",
        str(tmp_path / "c.sqlite"),
        *extra,
    ]


def test_solve_exits_1_naming_failed_scenarios_and_a_rerun_retries(monkeypatch, tmp_path):
    backend = Flaky(accept, up=False)
    monkeypatch.setattr(dialogue_setup, "make_backend", lambda opts: backend)
    out = tmp_path / "dead"
    result = CliRunner().invoke(app, solve_args(tmp_path, "--out", str(out)))
    assert isinstance(result.exception, UnsolvedScenarios), result.output
    assert result.exception.exit_code == 1
    assert "fruit-" in str(result.exception) and "connection refused" in str(result.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["solved"] == 0 and len(summary["failed"]) == 2
    assert stored_texts(tmp_path / "c.sqlite") == []
    backend.up = True
    out = tmp_path / "healthy"
    result = CliRunner().invoke(app, solve_args(tmp_path, "--out", str(out)))
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["solved"] == 2 and summary["failed"] == []
    assert json.loads((out / "expansion.json").read_text())["model_calls"] > 0


def test_solve_against_a_dead_then_healthy_endpoint(tmp_path):
    state = {"action": ("status", 500)}
    env = {**os.environ, "PYTHONPATH": SRC, "STRATAGEM_CACHE": str(tmp_path / "root")}
    with FaultServer(handler=lambda request, index: state["action"]) as server:
        args = [
            sys.executable,
            "-c",
            "from stratagem.cli.main import main; main()",
            "solve",
            "--game",
            "meeting",
            "--agent",
            "openai:fake",
            "--base-url",
            server.url,
            "--max-retries",
            "0",
            "--instructions",
            "Monday,any",
            "--scenarios",
            "1",
            "--replies",
            "1",
            "--seeds",
            "1",
            "--iterations",
            "20",
            "--cache",
            str(tmp_path / "c.sqlite"),
            "--out",
        ]
        dead = subprocess.run(
            [*args, str(tmp_path / "dead")], env=env, capture_output=True, text=True
        )
        assert dead.returncode == 1, dead.stderr + dead.stdout
        assert "meeting-" in dead.stderr + dead.stdout
        assert "Traceback" not in dead.stderr
        assert stored_texts(tmp_path / "c.sqlite") == []
        asked = len(server.requests)
        assert asked == 2  # one message per instruction, no answer stored
        state["action"] = ("ok", "Fine.\nACCEPT")
        healthy = subprocess.run(
            [*args, str(tmp_path / "healthy")], env=env, capture_output=True, text=True
        )
        assert healthy.returncode == 0, healthy.stderr + healthy.stdout
        assert len(server.requests) == asked + 2  # the failures were retried
    summary = json.loads((tmp_path / "healthy" / "summary.json").read_text())
    assert summary["solved"] == 1 and summary["failed"] == []


def test_psro_and_imitate_never_turn_a_failure_into_a_payoff(monkeypatch, tmp_path):
    backend = Flaky(accept, up=False)
    monkeypatch.setattr(dialogue_setup, "make_backend", lambda opts: backend)
    monkeypatch.setattr(imitation, "load_embedder", lambda: fake_embed)
    cache = str(tmp_path / "c.sqlite")
    psro_args = ["psro", "--game", "fruit", "--initial", "calm,any", "--candidates", "calm,any"]
    psro_args += ["--scenarios", "1", "--seeds", "1", "--iterations", "2", "--cache", cache]
    result = CliRunner().invoke(app, [*psro_args, "--out", str(tmp_path / "p")])
    assert isinstance(result.exception, UnsolvedScenarios), result.output
    imitate_args = ["imitate", "--game", "fruit", "--instructions", "calm,assertive,any"]
    imitate_args += ["--train", "2", "--test", "1", "--seeds", "1", "--steps", "10"]
    imitate_args += ["--iterations", "20", "--cache", cache, "--out", str(tmp_path / "i")]
    result = CliRunner().invoke(app, imitate_args)
    assert isinstance(result.exception, UnsolvedScenarios), result.output
    assert not (tmp_path / "i" / "mlp.pt").exists()
    assert stored_texts(cache) == []
    backend.up = True
    result = CliRunner().invoke(app, [*psro_args, "--out", str(tmp_path / "p2")])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, imitate_args[:-1] + [str(tmp_path / "i2")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("command", "instructions", "message"),
    [
        ("solve", "calm,assertive", "needs 'any'"),
        ("solve", "calm,calm,any", "given twice: calm"),
        ("imitate", "calm,assertive", "needs 'any'"),
        ("imitate", "calm,any,calm", "given twice: calm"),
    ],
)
def test_instructions_are_checked_before_any_model_call(
    monkeypatch, tmp_path, command, instructions, message
):
    made = []
    monkeypatch.setattr(dialogue_setup, "make_backend", lambda opts: made.append(1))
    monkeypatch.setattr(imitation, "load_embedder", lambda: made.append(2))
    args = [command, "--game", "fruit", "--instructions", instructions]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "x")])
    assert isinstance(result.exception, ConfigError), result.output
    assert message in str(result.exception) and "\n" not in str(result.exception)
    assert made == []
    assert result.exception.exit_code == 2
