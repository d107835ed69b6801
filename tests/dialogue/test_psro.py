"""PSRO over instruction strings on the scripted backend: meta-game, oracle, LLM proposals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from stratagem.backends.cache import CachedBackend
from stratagem.backends.scripted import ScriptedBackend
from stratagem.cli.main import app
from stratagem.games.dialogue import get_domain
from stratagem.solvers.dialogue import (
    InstructionOracle,
    instruction_meta_game,
    instruction_payoffs,
)
from stratagem.solvers.dialogue import setup as dialogue_setup
from stratagem.solvers.psro import MetaGame, psro

from .conftest import note


def tone_script(chat):
    first = chat[0]["content"]
    if first.startswith("You suggest"):
        return "angry" if "angry" not in chat[-1]["content"] else "calm"
    how = note(chat)
    if "calm" in how:
        return "Fine.\nACCEPT"
    if "angry" in how:
        return "Never.\nREJECT"
    return "Hmm."


def setup(propose=0):
    domain = get_domain("fruit", ("calm", "submissive", "any"))
    scenarios = [domain.scenario(s) for s in (3, 4)]
    backend = ScriptedBackend(tone_script)
    cached = CachedBackend(backend)
    return domain, scenarios, backend, cached


def test_cell_payoff_is_the_tree_value_of_always_playing_the_pair():
    domain, scenarios, backend, cached = setup()
    pairs = [("calm", "calm"), ("any", "calm"), ("calm", "any")]
    values = instruction_payoffs(domain, scenarios, cached, pairs, replies=2, seeds=2)
    # seat 1 (who answers the opening offer) accepts under calm: the opening trade is paid
    expected = np.mean([domain.payoff(s, [s.opening, "Fine.\nACCEPT"]) for s in scenarios], 0)
    assert values["calm", "calm"] == pytest.approx(tuple(expected))
    assert values["any", "calm"] == values["calm", "calm"]  # settled before seat 0 writes
    assert values["calm", "any"] == (0.0, 0.0)  # "Hmm.", then seat 0 accepts nothing
    assert len(backend.calls) == 2  # all cells' trees expand together: one call per depth


def test_psro_adds_the_best_instruction_and_llm_proposals():
    domain, scenarios, backend, cached = setup()
    meta = MetaGame(instruction_meta_game(domain, scenarios, cached, replies=2, seeds=1))
    for name in ("submissive", "any"):
        meta.add(0, name)
        meta.add(1, name)
    oracle = InstructionOracle(["submissive"], domain, cached, propose=2, seed=0)
    result = psro(meta, oracle, "replicator", initial=("any", "any"), iterations=3)
    words = [p["word"] for p in oracle.proposals]
    assert words[:2] == ["angry", "angry"] and [p["status"] for p in oracle.proposals[:2]] == [
        "ok",
        "failed",  # the same word twice in one round: one is kept
    ]
    assert "angry" in oracle.candidates and "calm" in oracle.candidates  # proposed later
    assert result.iterations[0].populations[1] == ("submissive", "any")
    assert len(result.iterations) >= 2


def test_psro_command_on_fruit(monkeypatch, tmp_path):
    backend = ScriptedBackend(tone_script)
    monkeypatch.setattr(dialogue_setup, "make_backend", lambda opts: backend)
    out = tmp_path / "psro"
    args = [
        "psro",
        "--game",
        "fruit",
        "--initial",
        "submissive,any",
        "--candidates",
        "calm,angry,any",
        "--scenarios",
        "2",
        "--replies",
        "2",
        "--seeds",
        "1",
        "--iterations",
        "3",
        "--propose",
        "1",
        "--meta-solver",
        "nash-bargaining",
        "--cache",
        str(tmp_path / "c.sqlite"),
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    log = json.loads((out / "psro.json").read_text())
    assert log["meta_solver"] == "nash-bargaining"
    assert log["iterations"][0]["populations"][0] == ["submissive", "any"]
    assert (out / "meta_strategy.png").exists()
    assert json.loads((out / "usage.json").read_text())["calls"] >= 2
    first = json.loads((out / "proposals.json").read_text())[0]
    assert (first["word"], first["status"]) == ("calm", "failed")  # already a candidate
    result = CliRunner().invoke(app, ["psro", "-g", "ipd", "--replies", "2", "-o", str(out)])
    assert "not a dialogue game" in str(result.exception)


def test_meta_strategy_plot_shows_a_run_of_one_iteration(tmp_path):
    # regression: stacked areas over a single iteration drew nothing (a run that stops at
    # iteration 1, converged or closed, had an empty plot); bars show it
    import matplotlib.image

    from stratagem.solvers.psro import Iteration, PSROResult, plot_meta_strategies

    one = Iteration(
        iteration=1,
        populations=(("calm", "any"), ("calm", "any")),
        meta_strategy=({"calm": 0.25, "any": 0.75}, {"calm": 1.0, "any": 0.0}),
        values=(0.0, 0.0),
        responses=("calm", "calm"),
        gains=(0.0, 0.0),
    )
    result = PSROResult(
        "replicator", (one,), "closed", one.populations, ((0.0,) * 2,) * 2, ((0.0,) * 2,) * 2
    )
    image = matplotlib.image.imread(plot_meta_strategies(result, tmp_path / "m.png"))[..., :3]
    coloured = (image.max(axis=-1) - image.min(axis=-1)) > 0.3  # saturated: bars, legend
    assert coloured.mean() > 0.1


def test_meta_strategy_plot_colours_a_name_alike_in_both_seats(tmp_path, monkeypatch):
    # regression: each panel coloured its own population in order, under one seat's legend,
    # so seat 0's "Monday" took the colour that the legend gave seat 1's "Thursday"
    import matplotlib.pyplot as plt

    from stratagem.solvers.psro import Iteration, PSROResult, plot_meta_strategies

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    it = Iteration(
        iteration=2,
        populations=(("any", "Monday"), ("any", "Thursday")),
        meta_strategy=({"any": 0.5, "Monday": 0.5}, {"any": 0.0, "Thursday": 1.0}),
        values=(0.0, 0.0),
        responses=("Monday", "Thursday"),
        gains=(0.0, 0.0),
    )
    zeros = ((0.0, 0.0), (0.0, 0.0))
    plot_meta_strategies(
        PSROResult("replicator", (it,), "closed", it.populations, zeros, zeros), tmp_path / "m.png"
    )
    seat0, seat1 = ({tuple(p.get_facecolor()) for p in ax.patches} for ax in figures[0].axes[:2])
    assert len(seat0) == len(seat1) == 2 and len(seat0 & seat1) == 1  # "any" alone shared
    legend = figures[0].axes[1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["any", "Monday", "Thursday"]
