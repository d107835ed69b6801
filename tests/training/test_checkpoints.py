"""Trainer checkpoints on a tiny PEFT model: atomic saves, resume, rotation keeping the best,
drift and a second writer refused through the run folder, the typed state's round trip."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from stratagem.errors import ConfigDriftError
from stratagem.runs import RunLockedError
from stratagem.training.checkpoints import Best, Checkpoints, TrainerState, newest_state
from tests.tiny_models import SMALLER


@pytest.fixture
def policy():
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, **SMALLER)
    torch.manual_seed(0)
    model = get_peft_model(
        LlamaForCausalLM(config), LoraConfig(r=2, target_modules=["q_proj"], lora_dropout=0.0)
    )
    return model


def step(policy, optimizer):
    loss = policy(input_ids=torch.tensor([[1, 2, 3]])).logits.sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def evaluation(step_: int, score: float) -> dict:
    return {"step": step_, "safety_j": {"value": score, "stderr": 0.1, "n": 3}}


def test_state_round_trips_through_json():
    state = TrainerState(step=3, log=[{"step": 1, "loss": 0.5}], below="sft")
    assert state.record_eval(evaluation(2, 1.0), "safety_j")
    assert not state.record_eval(evaluation(3, 0.5), "safety_j")
    back = TrainerState.from_json(state.to_json())
    assert back == state
    assert back.best == Best(2, 1.0, "safety_j", "checkpoint-2/adapter", "sft")


def test_save_resume_rotate_and_keep_the_best(policy, tmp_path):
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=0.1)
    scores = {1: 0.0, 2: 3.0, 3: 1.0, 4: 2.0}
    with Checkpoints(tmp_path, {"lr": 0.1}, keep=2) as ckpt:
        assert ckpt.resume(policy, optimizer) is None
        state = TrainerState()
        for n in range(1, 5):
            step(policy, optimizer)
            state.step = n
            state.log.append({"step": n})
            state.record_eval(evaluation(n, scores[n]), "safety_j")
            ckpt.save(state, policy, optimizer)
        weights = {k: v.clone() for k, v in policy.state_dict().items() if "lora" in k}
        rng = torch.get_rng_state()
    kept = sorted(d.name for d in tmp_path.glob("checkpoint-*"))
    assert kept == ["checkpoint-2", "checkpoint-4"]  # the best (2) and the newest
    assert json.loads((tmp_path / "best.json").read_text())["step"] == 2
    assert all((tmp_path / k / "COMPLETE").exists() for k in kept)
    assert newest_state(tmp_path).step == 4

    (tmp_path / "checkpoint-5.tmp").mkdir()  # a save killed midway
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()
    torch.manual_seed(123)
    with Checkpoints(tmp_path, {"lr": 0.1}, keep=2) as ckpt:
        with pytest.warns(UserWarning, match="incomplete checkpoint"):
            resumed = ckpt.resume(policy, optimizer)
    assert resumed is not None and resumed.step == 4 and len(resumed.log) == 4
    for k, v in policy.state_dict().items():
        if "lora" in k:
            assert torch.equal(v, weights[k]), k
    assert torch.equal(torch.get_rng_state(), rng)
    assert optimizer.state_dict()["state"]


def test_drift_and_a_second_writer_are_refused(tmp_path):
    with Checkpoints(tmp_path, {"lr": 0.1, "rollouts": 2}):
        with pytest.raises(RunLockedError, match="in use"):
            Checkpoints(tmp_path, {"lr": 0.1, "rollouts": 2})
    with pytest.raises(ConfigDriftError, match="rollouts: 2 -> 3"):
        Checkpoints(tmp_path, {"lr": 0.1, "rollouts": 3})
    Checkpoints(tmp_path, {"lr": 0.1, "rollouts": 2}).close()  # the same settings reopen it


class Killed(Exception):
    """The process dies here."""


def saved(tmp_path, policy, optimizer, scores: dict[int, float]) -> TrainerState:
    state = TrainerState()
    with Checkpoints(tmp_path, {"lr": 0.1}) as ckpt:
        for n, score in scores.items():
            step(policy, optimizer)
            state.step = n
            state.record_eval(evaluation(n, score), "safety_j")
            ckpt.save(state, policy, optimizer)
    return state


def assert_consistent(tmp_path, policy, optimizer, step_: int, best: int) -> None:
    """Reopening the folder resumes ``step_``; best.json names ``best``, a complete folder."""
    with Checkpoints(tmp_path, {"lr": 0.1}) as ckpt, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a killed save's checkpoint-N.tmp is ignored, as ever
        resumed = ckpt.resume(policy, optimizer)
    assert resumed is not None and resumed.step == step_
    named = json.loads((tmp_path / "best.json").read_text())
    assert named["step"] == best == resumed.best.step
    assert (tmp_path / named["adapter"] / "adapter_model.safetensors").exists()
    assert (tmp_path / f"checkpoint-{best}" / "COMPLETE").exists()
    assert not list(tmp_path.glob("*.old"))


def test_a_kill_between_the_checkpoint_rename_and_best_json_resumes(policy, tmp_path, monkeypatch):
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=0.1)
    saved(tmp_path, policy, optimizer, {1: 0.0})
    from stratagem.training import checkpoints

    write = checkpoints._write_atomic

    def dies_before_best(path, text):
        if path.name == "best.json" and json.loads(text)["step"] == 2:
            raise Killed
        write(path, text)

    monkeypatch.setattr(checkpoints, "_write_atomic", dies_before_best)
    with pytest.raises(Killed):
        saved(tmp_path, policy, optimizer, {2: 3.0})  # a new best, renamed into place
    assert (tmp_path / "checkpoint-2" / "COMPLETE").exists()
    assert json.loads((tmp_path / "best.json").read_text())["step"] == 1  # lags, names a folder
    monkeypatch.setattr(checkpoints, "_write_atomic", write)
    assert_consistent(tmp_path, policy, optimizer, step_=2, best=2)


@pytest.mark.parametrize("where", ["before the new folder", "before the old one is removed"])
def test_a_kill_while_a_step_is_saved_again_keeps_it(policy, tmp_path, monkeypatch, where):
    import os
    import shutil

    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=0.1)
    saved(tmp_path, policy, optimizer, {1: 1.0, 2: 0.0})
    replace, rmtree = os.replace, shutil.rmtree

    def dies_on_replace(src, dst):
        if str(src).endswith("checkpoint-2.tmp"):
            raise Killed
        replace(src, dst)

    def dies_on_rmtree(path, *a, **k):
        if str(path).endswith("checkpoint-2.old") and (tmp_path / "checkpoint-2.old").exists():
            raise Killed
        rmtree(path, *a, **k)

    if where == "before the new folder":
        monkeypatch.setattr(os, "replace", dies_on_replace)
    else:
        monkeypatch.setattr(shutil, "rmtree", dies_on_rmtree)
    with pytest.raises(Killed):
        saved(tmp_path, policy, optimizer, {2: 0.5})  # step 2 saved again (its own best)
    monkeypatch.undo()
    old_back = where == "before the new folder"  # else the new one is whole and stays
    assert_consistent(tmp_path, policy, optimizer, step_=2, best=1 if old_back else 2)
    assert len(newest_state(tmp_path).evals) == (2 if old_back else 1)  # which state it holds
