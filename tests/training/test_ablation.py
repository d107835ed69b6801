"""SEPO ablations: the penalty modes on IPD and Kuhn (three arms from one start, compared) and
the safety axis (a run beside its λ = 0 control)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.training.sepo.ablation import arms, run_ablation
from stratagem.training.sepo.trainer import SEPOArgs

MODES = ["shared", "per_rollout", "own_episodes"]


def state(folder):
    return json.loads((folder / "checkpoint-1" / "trainer_state.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("game", ["ipd", "kuhn"])
def test_three_penalty_modes_from_one_start(tiny_args, tmp_path, game):
    out = tmp_path / "ablation"
    base = tiny_args(out, game=game, steps=1, checkpoint_every=1, eval_episodes=1)
    table = run_ablation(base, "penalty", MODES, log=lambda _: None)

    states = {mode: state(out / f"penalty-{mode}") for mode in MODES}
    prints = {
        mode: json.loads((out / f"penalty-{mode}" / "run.json").read_text())["fingerprint"]
        for mode in MODES
    }
    for mode in MODES:  # arms differ in the penalty (and their folder) only
        differ = {k for k in prints[mode] if prints[mode][k] != prints["own_episodes"][k]}
        assert differ == (set() if mode == "own_episodes" else {"penalty", "out"})
    # one starting policy: identical step-0 evaluations in every arm
    first = [s["evals"][0] for s in states.values()]
    assert all(e == first[0] for e in first)
    # shared and per_rollout train on the training pool only (their exploit and collusive
    # episodes only estimate P), with the same seeds and per-episode sampling, hence the same
    # trained decisions; own_episodes trains on all three pools. Both penalties are non-zero.
    logs = {mode: s["log"][0] for mode, s in states.items()}
    assert logs["shared"]["samples"] == logs["per_rollout"]["samples"]
    assert logs["shared"]["samples"] < logs["own_episodes"]["samples"]
    assert logs["shared"]["penalty"] > 0 and logs["per_rollout"]["penalty"] > 0

    assert list(table["penalty"]) == [m for m in MODES for _ in (0, 1)]
    assert list(table["step"]) == [0, 1] * 3
    assert (game == "kuhn") == ("exact_exploitability" in table)
    assert pd.read_csv(out / "ablation.csv").shape == table.shape
    md = (out / "ablation.md").read_text().splitlines()
    assert md[0].startswith("| penalty | step | safety_j") and len(md) == 2 + len(MODES)
    assert (out / "ablation.png").stat().st_size > 0


def test_ablation_settings_are_checked(tmp_path):
    base = SEPOArgs(out=tmp_path)
    with pytest.raises(UnknownNameError, match="did you mean 'shared'"):
        arms(base, "penalty", ["shared", "shard"])
    with pytest.raises(ConfigError, match="at least two"):
        arms(base, "penalty", ["shared", "shared"])
    with pytest.raises(UnknownNameError, match="ablation setting"):
        arms(base, "temperature", ["0.5", "1.0"])
    with pytest.raises(ConfigError, match="eval_episodes"):
        arms(SEPOArgs(out=tmp_path, eval_episodes=0), "normalisation", ["round", "episode"])
    folders = [a.out.name for a in arms(base, "normalisation", ["round", "episode"])]
    assert folders == ["normalisation-round", "normalisation-episode"]


def test_safety_axis_is_a_run_beside_its_control(tmp_path):
    base = SEPOArgs(out=tmp_path)
    runs = arms(base, "safety", ["1", "0"])
    assert [(a.safety, a.out.name) for a in runs] == [(1.0, "safety-1"), (0.0, "safety-0")]
    assert runs[0] == SEPOArgs(out=tmp_path / "safety-1")  # the run itself, at its default λ
    with pytest.raises(ConfigError, match="at least two"):
        arms(base, "safety", ["1", "1.0"])
    with pytest.raises(ConfigError, match="takes numbers"):
        arms(base, "safety", ["1", "nan"])
    with pytest.raises(ConfigError, match="must be ≥ 0"):
        arms(base, "safety", ["1", "-1"])
