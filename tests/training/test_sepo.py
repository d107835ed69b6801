"""SEPO trainer on a tiny random LM with the embedded tokenizer: resume equals an uninterrupted
run (RELIABILITY H1-H4) and the shared penalty adds exactly zero gradient on a real step."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from stratagem.games import get_game
from stratagem.training import sepo
from stratagem.training.sepo import SEPOArgs, train_sepo

pytestmark = pytest.mark.slow


def adapter_tensors(folder):
    from safetensors.torch import load_file

    return load_file(folder / "adapter" / "adapter_model.safetensors")


def test_resume_equals_uninterrupted(tiny_args, tmp_path):
    train_sepo(tiny_args(tmp_path / "full"), log=lambda _: None)
    for steps in (2, 4, 6):  # "killed" after step 2 and after step 4, then resumed
        train_sepo(tiny_args(tmp_path / "resumed", steps=steps), log=lambda _: None)
    full = adapter_tensors(tmp_path / "full/checkpoint-6")
    resumed = adapter_tensors(tmp_path / "resumed/checkpoint-6")
    assert any(v.abs().sum() > 0 for k, v in full.items() if "lora_B" in k), "training moved"
    assert full.keys() == resumed.keys()
    for key in full:
        assert torch.equal(full[key], resumed[key]), key
    first = torch.load(tmp_path / "full/checkpoint-2/trainer.pt", weights_only=True)
    assert first["optimizer"]["state"], "the optimizer state is in the checkpoint"
    log_full = json.loads((tmp_path / "full/checkpoint-6/trainer_state.json").read_text())["log"]
    log_res = json.loads((tmp_path / "resumed/checkpoint-6/trainer_state.json").read_text())["log"]
    assert [e["reward"] for e in log_full] == [e["reward"] for e in log_res]
    assert [e["loss"] for e in log_full] == [e["loss"] for e in log_res]


def test_incomplete_checkpoint_is_ignored_and_drift_refused(tiny_args, tmp_path):
    out = tmp_path / "run"
    train_sepo(tiny_args(out, steps=2), log=lambda _: None)
    (out / "checkpoint-4.tmp").mkdir()  # a save killed midway
    with pytest.warns(UserWarning, match="incomplete checkpoint"):
        train_sepo(tiny_args(out, steps=4), log=lambda _: None)
    assert (out / "checkpoint-4" / "COMPLETE").exists()
    from stratagem.errors import ConfigDriftError

    with pytest.raises(ConfigDriftError, match="rollouts"):
        train_sepo(tiny_args(out, steps=6, rollouts=3), log=lambda _: None)


def test_shared_penalty_adds_zero_gradient_on_a_real_step(tiny_args, tmp_path, monkeypatch):
    args = tiny_args(tmp_path, penalty="shared").resolved()
    game = get_game("kuhn")
    policy, tokenizer = sepo.load_policy(args)
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.base import Sampling
    from stratagem.backends.hf import HFBackend

    agent = LLMAgent(
        HFBackend.from_model(policy, tokenizer, "tiny"),
        game,
        Sampling(0.8, 1.0, 6),
        fallback="sample",
    )
    traces = sepo.rollout(agent, args, step=0)
    with_penalty = sepo.samples_from(traces, game, args)
    monkeypatch.setattr(sepo, "apply_penalty", lambda rewards, p, mode: rewards)
    without = sepo.samples_from(traces, game, args)
    assert [s.advantage for s in with_penalty] == pytest.approx(
        [s.advantage for s in without], abs=1e-9
    )

    def grads(samples):
        policy.zero_grad(set_to_none=True)
        sepo.accumulate_gradients(policy, samples, args, norm=10.0)
        return [p.grad.clone() for p in policy.parameters() if p.requires_grad]

    for a, b in zip(grads(with_penalty), grads(without), strict=True):
        assert torch.allclose(a, b, atol=1e-9)
    assert any(g.abs().sum() > 0 for g in grads(without))  # the step does move the policy


def test_penalty_modes_and_groups():
    assert sepo.groups_for("ipd", "shared") == [
        ("train", n) for n in ("TitForTat", "GenerousTFT", "Mixed", "GrimTrigger")
    ]
    own = sepo.groups_for("ipd", "own_episodes")
    assert ("exploit", "AlwaysDefect") in own and ("collusive", "AlwaysCooperate") in own
    resolved = dataclasses.replace(SEPOArgs(game="kuhn")).resolved()
    assert resolved.kl == 0.2 and resolved.learning_rate == 3e-6
    assert SEPOArgs(game="ipd").resolved().kl == 0.01


def test_best_checkpoint_survives_rotation(tiny_args, tmp_path, monkeypatch):
    """H5: save_total_limit=2, best at step 2 of 10 → step 2 stays, best.json points to it."""
    safety_j = {0: -5.0, 2: 0.5, 4: -1.0, 6: -0.2, 8: -3.0, 10: 0.1}

    def scripted_eval(policy, tokenizer, game, args, step):
        return {
            "step": step,
            **{
                k: {"value": safety_j[step] if k == "safety_j" else 0.0, "stderr": 0.0, "n": 1}
                for k in ("safety_j", "pay", "exploit")
            },
        }

    monkeypatch.setattr(sepo, "evaluate_checkpoint", scripted_eval)
    out = tmp_path / "run"
    train_sepo(tiny_args(out, steps=10, eval_episodes=1, save_total_limit=2), log=lambda _: None)
    kept = sorted(int(d.name.split("-")[1]) for d in out.glob("checkpoint-*"))
    assert kept == [2, 10]  # step 0 (the starting policy), 4, 6 and 8 rotated away
    evals = json.loads((out / "checkpoint-10/trainer_state.json").read_text())["evals"]
    assert [e["step"] for e in evals] == [0, 2, 4, 6, 8, 10]
    best = json.loads((out / "best.json").read_text())
    assert best == {"step": 2, "safety_j": 0.5, "adapter": "checkpoint-2/adapter"}
    from peft import PeftConfig

    assert PeftConfig.from_pretrained(out / best["adapter"]).r == 4  # loadable by `eval --adapter`
    assert (out / "curve.png").exists()


def test_sft_adapter_is_the_start_and_the_kl_reference(tiny_args, tiny_model, tmp_path):
    """Starting from an SFT adapter: it is merged into the weights, SEPO's fresh LoRA starts at
    zero (policy == SFT) and disabling it gives the SFT policy, not the base model."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from stratagem.backends.hf import HFBackend

    torch.manual_seed(1)
    sft = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )  # a non-zero "trained" adapter
    sft.save_pretrained(tmp_path / "sft")
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        want = sft(input_ids=ids).logits
        with sft.disable_adapter():
            base = sft(input_ids=ids).logits
    assert not torch.allclose(want, base)
    policy, _ = sepo.load_policy(
        tiny_args(tmp_path / "run", adapter=str(tmp_path / "sft")).resolved()
    )
    with torch.no_grad():
        assert torch.allclose(policy(input_ids=ids).logits, want, atol=1e-5)
        with policy.disable_adapter():
            assert torch.allclose(policy(input_ids=ids).logits, want, atol=1e-5)
    policy.save_pretrained(tmp_path / "sepo")
    stacked = HFBackend(
        tiny_model, adapter=f"{tmp_path / 'sft'},{tmp_path / 'sepo'}", dtype="float32"
    )
    with torch.no_grad():
        assert torch.allclose(stacked.model(input_ids=ids).logits, want, atol=1e-5)
