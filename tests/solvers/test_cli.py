"""The solve and psro subcommands with tiny budgets (mounted on a local app here)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from stratagem.cli.main import app
from stratagem.errors import ConfigError


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_solve_kuhn_writes_policy_curve_and_value(tmp_path):
    out = tmp_path / "kuhn"
    result = run("solve", "--game", "kuhn", "--iterations", "300", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "-0.0555" in result.output
    policy = json.loads((out / "policy.json").read_text())
    assert len(policy) == 12 and policy["K:"]["BET"] > 0  # K bets sometimes at equilibrium
    summary = json.loads((out / "summary.json").read_text())
    assert summary["value"][0] == pytest.approx(-1 / 18, abs=1e-4)
    assert (out / "exploitability.png").stat().st_size > 10_000
    lines = (out / "curve.csv").read_text().splitlines()
    assert lines[0] == "iteration,exploitability" and lines[-1].startswith("300,")
    assert json.loads((out / "config.json").read_text())["algorithm"] == "cfr+"


def test_solve_leduc_with_vanilla_cfr(tmp_path):
    out = tmp_path / "leduc"
    result = run(
        "solve", "-g", "leduc", "--algorithm", "cfr", "-n", "20", "--points", "5", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    assert len(json.loads((out / "policy.json").read_text())) == 936


def test_solve_refuses_games_without_a_tree(tmp_path):
    result = run("solve", "--game", "ipd", "--out", str(tmp_path))
    assert isinstance(result.exception, ConfigError)
    assert "no solver tree" in str(result.exception)
    result = run("solve", "--game", "leduk", "--out", str(tmp_path))
    assert "did you mean 'leduc'" in str(result.exception)


def test_psro_over_ipd(tmp_path):
    out = tmp_path / "psro"
    result = run(
        "psro",
        "--game",
        "ipd",
        "--meta-solver",
        "cce",
        "--candidates",
        "AlwaysCooperate,AlwaysDefect,TitForTat",
        "--episodes",
        "1",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    log = json.loads((out / "psro.json").read_text())
    assert log["stopped"] == "converged"
    assert log["iterations"][-1]["meta_strategy"][0]["AlwaysDefect"] == pytest.approx(1.0)
    assert (out / "meta_strategy.png").exists()
    assert (out / "meta_game.csv").read_text().startswith("seat0,seat1,payoff0,payoff1")


def test_psro_exact_on_kuhn(tmp_path):
    out = tmp_path / "kuhn"
    args = ["psro", "-g", "kuhn", "--oracle", "exact", "-m", "zero-sum-nash", "-o", str(out)]
    result = run(*args)
    assert result.exit_code == 0, result.output
    final = json.loads((out / "psro.json").read_text())["iterations"][-1]
    assert final["values"][0] == pytest.approx(-1 / 18, abs=1e-9)


def test_psro_rejects_unknown_names(tmp_path):
    result = run("psro", "-g", "ipd", "-m", "replicatr", "-o", str(tmp_path))
    assert "did you mean 'replicator'" in str(result.exception)
    result = run("psro", "-g", "ipd", "--candidates", "TitForTatt", "-o", str(tmp_path))
    assert "did you mean 'TitForTat'" in str(result.exception)


def test_psro_over_leducs_strategies(tmp_path):
    """Leduc is a text game too: without the exact oracle PSRO plays its strategies."""
    out = tmp_path / "leduc"
    args = ["psro", "-g", "leduc", "--candidates", "TightAggressive,AlwaysRaise,RandomLegal"]
    result = run(*args, "--episodes", "1", "-o", str(out))
    assert result.exit_code == 0, result.output
    log = json.loads((out / "psro.json").read_text())
    assert set(log["iterations"][-1]["meta_strategy"][0]) <= {
        "TightAggressive",
        "AlwaysRaise",
        "RandomLegal",
    }
