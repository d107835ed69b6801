"""SEPO trainer on a tiny random LM with the embedded tokenizer: resume equals an uninterrupted
run (RELIABILITY H1-H4); on a real step the shared penalty adds exactly zero gradient, the PPO
ratio is taken against the rollout's log-probs, and no full-vocabulary logits are built."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from stratagem.games import get_game
from stratagem.training.packing import per_decision
from stratagem.training.policy import load_policy
from stratagem.training.sepo import rewards as sepo_rewards
from stratagem.training.sepo import trainer as sepo
from stratagem.training.sepo.trainer import SEPOArgs, train_sepo
from stratagem.training.update import accumulate_gradients, reference_logprobs, update

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


def test_a_decaying_schedule_resumed_in_parts_equals_an_uninterrupted_run(tiny_args, tmp_path):
    settings = dict(lr_schedule="linear", lr_decay_steps=4, steps=4)
    train_sepo(tiny_args(tmp_path / "full", **settings), log=lambda _: None)
    for steps in (2, 4):
        resumed_args = tiny_args(tmp_path / "resumed", **{**settings, "steps": steps})
        train_sepo(resumed_args, log=lambda _: None)
    full = adapter_tensors(tmp_path / "full/checkpoint-4")
    resumed = adapter_tensors(tmp_path / "resumed/checkpoint-4")
    for key in full:
        assert torch.equal(full[key], resumed[key]), key
    for run in ("full", "resumed"):
        log = json.loads((tmp_path / run / "checkpoint-4/trainer_state.json").read_text())["log"]
        assert [e["lr"] for e in log] == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])
        trainer = torch.load(tmp_path / run / "checkpoint-4/trainer.pt", weights_only=True)
        assert trainer["optimizer"]["param_groups"][0]["lr"] == pytest.approx(2.5e-4)


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


def rolled_out(tiny_args, tmp_path, **overrides):
    """A policy, its agent and one step's rollouts on the tiny LM."""
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.base import Sampling
    from stratagem.backends.hf import HFBackend

    args = tiny_args(tmp_path, **overrides).resolved()
    game = get_game(args.game)
    policy, tokenizer = load_policy(args)
    policy.eval()
    backend = HFBackend.from_model(policy, tokenizer, "tiny", prefix_reuse=True)
    agent = LLMAgent(backend, game, Sampling(args.temperature, 1.0, 6), fallback="sample")
    return args, game, policy, sepo.rollout(agent, args, step=0)


def gradients(policy, sequences, args):
    policy.zero_grad(set_to_none=True)
    refs = reference_logprobs(policy, sequences, args)
    accumulate_gradients(policy, sequences, refs, args)
    return [p.grad.clone() for p in policy.parameters() if p.requires_grad]


def test_shared_penalty_is_not_zero_and_adds_zero_gradient_on_a_real_step(
    tiny_args, tmp_path, monkeypatch
):
    args, game, policy, traces = rolled_out(
        tiny_args, tmp_path, game="ipd", penalty="shared", lora_dropout=0.0
    )
    groups = sepo.step_groups(traces, game, args)
    assert all(p > 0 for g in groups for p in g.penalties)  # P = λe·e + λc·c + λx·x ≠ 0
    with_penalty = sepo.turns_from(groups, game, args)
    monkeypatch.setattr(sepo_rewards, "subtract_penalty", lambda rewards, p: rewards)
    without = sepo.turns_from(sepo.step_groups(traces, game, args), game, args)
    assert [t.advantage for t in with_penalty] == pytest.approx(
        [t.advantage for t in without], abs=1e-9
    )
    assert any(t.advantage != 0 for t in without)
    policy.train()
    a = gradients(policy, per_decision(with_penalty), args)
    b = gradients(policy, per_decision(without), args)
    for x, y in zip(a, b, strict=True):
        assert torch.allclose(x, y, atol=1e-9)
    assert any(g.abs().sum() > 0 for g in a)  # the step does move the policy


def test_rollout_logprobs_are_the_old_policy_and_the_clip_binds_in_epoch_two(tiny_args, tmp_path):
    """Old log-probs are recorded while sampling, at the sampling temperature: the first epoch's
    ratio is 1 (to float error); the second epoch's moves, and with a large step the clip holds."""
    args, game, policy, traces = rolled_out(
        tiny_args, tmp_path, lora_dropout=0.0, epochs=2, learning_rate=0.05, kl=0.0
    )
    turns = sepo.turns_from(sepo.step_groups(traces, game, args), game, args)
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.learning_rate)
    first, second = update(policy, optimizer, params, per_decision(turns), args)
    assert first["ratio_max_dev"] < 1e-4 and first["clipped"] == 0
    assert second["ratio_max_dev"] > 0.2 and second["clipped"] > 0


def test_old_logprobs_follow_the_sampling_temperature(tiny_args, tmp_path):
    args, game, policy, traces = rolled_out(tiny_args, tmp_path, temperature=0.5)
    turns = sepo.turns_from(sepo.step_groups(traces, game, args), game, args)
    seq = per_decision(turns)[0]
    from stratagem.training.logprobs import sequence_logprobs

    with torch.no_grad():
        at_t = sequence_logprobs(policy, seq.ids, seq.positions, temperature=0.5)
        at_one = sequence_logprobs(policy, seq.ids, seq.positions, temperature=1.0)
    old = torch.tensor(seq.old)
    assert torch.allclose(at_t, old, atol=1e-4)
    assert not torch.allclose(at_one, old, atol=1e-2)


def test_the_real_step_never_builds_full_vocabulary_logits(tiny_args, tmp_path):
    """Every tensor the forward and backward passes create: none holds more than ``chunk``
    positions of vocabulary-wide scores, while the sequences are hundreds of tokens long."""
    from torch.utils._python_dispatch import TorchDispatchMode

    args, game, policy, traces = rolled_out(tiny_args, tmp_path, game="ipd")
    sequences = per_decision(sepo.turns_from(sepo.step_groups(traces, game, args), game, args))
    vocab = policy.get_output_embeddings().weight.shape[0]
    assert max(len(s.ids) for s in sequences) > 10 * args.chunk

    class Shapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.widest = 0  # most positions of one (…, positions, V) tensor

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, tuple | list) else (out,):
                if isinstance(t, torch.Tensor) and t.dim() >= 2 and t.shape[-1] == vocab:
                    self.widest = max(self.widest, t.numel() // vocab)
            return out

    policy.train()
    with Shapes() as shapes:
        gradients(policy, sequences, args)
    assert 0 < shapes.widest <= args.chunk
    with Shapes() as naive:  # the check does see full logits where they exist
        with torch.no_grad():
            policy(input_ids=torch.tensor([sequences[0].ids]))
    assert naive.widest == len(sequences[0].ids)


def test_penalty_modes_and_groups():
    assert sepo.groups_for("ipd", "shared") == [
        ("train", n) for n in ("TitForTat", "GenerousTFT", "Mixed", "GrimTrigger")
    ]
    assert sepo.groups_for("ipd", "per_rollout") == sepo.groups_for("ipd", "shared")
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
    assert best == {
        "step": 2,
        "score": 0.5,
        "metric": "safety_j",
        "adapter": "checkpoint-2/adapter",
        "below": None,
    }
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
    policy, _ = load_policy(tiny_args(tmp_path / "run", adapter=str(tmp_path / "sft")).resolved())
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


def test_a_step_with_the_best_responder_trains_against_it(tiny_args, tmp_path):
    entries = {}
    for flag in (False, True):
        out = tmp_path / str(flag)
        train_sepo(tiny_args(out, steps=1, exploit_best_response=flag), log=lambda _: None)
        state = json.loads((out / "checkpoint-1/trainer_state.json").read_text())
        entries[flag] = state["log"][0]
    entry = entries[True]
    # its group's rollouts are trained on: more samples and sequences than without it
    assert entry["samples"] > entries[False]["samples"]
    assert entry["sequences"] == entries[False]["sequences"] + 2  # 2 rollouts, one sequence each
    assert "exploitability" not in entries[False]
    # the exploitability of the policy that played the step, logged with it: a random LM plays
    # near uniformly, whose exploitability is 11/24
    assert entry["exploitability"] == pytest.approx(11 / 24, abs=0.05)
    assert entry["signal_tokens"] > 0
