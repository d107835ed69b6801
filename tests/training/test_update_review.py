"""The update's PPO ratio, KL reference and memory options on a tiny LM: the first epoch's ratio is
exactly 1 on a bf16 policy and with LoRA dropout on, however far the rollout-time log-probs are
from the trainer's; a refreshed reference is the policy of its refresh; gradient checkpointing
gives the same gradients; the LoRA wraps no module of a multimodal model's vision tower."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from stratagem.training.bargaining.trainer import BargainingArgs
from stratagem.training.grpo import scheduled_learning_rate
from stratagem.training.logprobs import sequence_logprobs
from stratagem.training.packing import TrainSequence
from stratagem.training.policy import (
    enable_gradient_checkpointing,
    language_model_targets,
    load_policy,
)
from stratagem.training.sepo.trainer import SEPOArgs
from stratagem.training.update import Reference, update


def sequences(policy, n: int = 3, length: int = 40) -> list[TrainSequence]:
    """Random sequences whose last 10 tokens are trained; their rollout-time log-probs are the
    fp32, dropout-free numbers a sampler would record (not the trainer's own)."""
    g = torch.Generator().manual_seed(1)
    vocab = policy.get_output_embeddings().weight.shape[0]
    out = []
    for _ in range(n):
        ids = torch.randint(0, vocab, (length,), generator=g).tolist()
        positions = list(range(length - 10, length))
        adv = torch.randn(10, generator=g).tolist()
        out.append(TrainSequence(ids, positions, [0.0] * 10, adv, [0.1] * 10))
    return out


def tiny_policy(tiny_args, tmp_path, **overrides):
    args = tiny_args(tmp_path, kl=0.05, **overrides).resolved()
    policy, _ = load_policy(args)
    torch.manual_seed(0)
    with torch.no_grad():  # a LoRA that already moved, so dropout changes the log-probs
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    return args, policy


def record_rollout_logprobs(policy, seqs, temperature):
    policy.eval()
    with torch.no_grad():
        for s in seqs:
            s.old = sequence_logprobs(
                policy.float(), s.ids, s.positions, temperature=temperature
            ).tolist()


@pytest.mark.parametrize(
    ("dtype", "dropout"), [(torch.bfloat16, 0.0), (torch.float32, 0.3), (torch.bfloat16, 0.3)]
)
def test_first_epoch_ratio_is_exactly_one(tiny_args, tmp_path, dtype, dropout):
    args, policy = tiny_policy(tiny_args, tmp_path, lora_dropout=dropout, epochs=2)
    seqs = sequences(policy)
    record_rollout_logprobs(policy, seqs, args.temperature)  # fp32, no dropout: the sampler
    policy.to(dtype)
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=0.05)
    first, second = update(policy, optimizer, params, seqs, args)
    # the sampler's numbers are off (bf16 rounding, dropout masks) ...
    assert first["rollout_logprob_max_dev"] > 1e-3
    # ... but the ratio of the first epoch is exactly 1, and it moves from the second on
    assert first["ratio_max_dev"] == 0.0 and first["clipped"] == 0
    assert second["ratio_max_dev"] > 0


def test_a_refreshed_reference_is_the_policy_of_its_refresh(tiny_args, tmp_path):
    args, policy = tiny_policy(tiny_args, tmp_path, lora_dropout=0.0)
    seqs = sequences(policy, n=1)
    policy.eval()
    reference = Reference()
    start = reference.logprobs(policy, seqs, args)[0]
    reference.refresh(policy)
    with torch.no_grad():
        now = sequence_logprobs(policy, seqs[0].ids, seqs[0].positions, temperature=0.8)
    assert torch.equal(reference.logprobs(policy, seqs, args)[0], now)
    assert not torch.allclose(start, now)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.add_(1.0)
    moved = {n: p.clone() for n, p in policy.named_parameters() if p.requires_grad}
    assert torch.equal(reference.logprobs(policy, seqs, args)[0], now)  # still the snapshot
    for name, p in policy.named_parameters():  # the policy's weights are back, bit for bit
        if p.requires_grad:
            assert torch.equal(p, moved[name]), name
    settings = dataclasses.replace(args, ref_refresh_every=5, ref_refresh_kl=0.5)
    assert [reference.due(s, 0.1, settings) for s in (4, 5, 10)] == [False, True, True]
    assert reference.due(3, 0.6, settings) and not reference.due(3, 0.6, args)


def test_gradient_checkpointing_gives_the_same_gradients(tiny_args, tmp_path):
    grads = []
    for flag in (False, True):
        args, policy = tiny_policy(tiny_args, tmp_path / str(flag), lora_dropout=0.0)
        if flag:
            enable_gradient_checkpointing(policy)
            # transformers renamed the flag (is_gradient_checkpointing before 5.2x)
            assert getattr(policy, "is_activation_checkpointing", None) or getattr(
                policy, "is_gradient_checkpointing", False
            )
        params = [p for p in policy.parameters() if p.requires_grad]
        optimizer = torch.optim.SGD(params, lr=0.0)
        update(policy, optimizer, params, sequences(policy), args)
        grads.append([p.grad.clone() for p in params])
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_new_options_at_their_defaults_keep_old_fingerprints():
    fingerprint = SEPOArgs().fingerprint()
    later = {"ref_refresh_every", "ref_refresh_kl", "gradient_checkpointing", "lr_schedule"}
    assert not (later | {"lr_decay_steps"}) & set(fingerprint)
    assert SEPOArgs(ref_refresh_every=5).fingerprint()["ref_refresh_every"] == 5
    assert SEPOArgs(lr_schedule="linear").fingerprint()["lr_schedule"] == "linear"


@pytest.mark.parametrize(
    ("schedule", "decay_steps", "expected"),
    [
        ("constant", None, [1e-3, 1e-3, 1e-3, 1e-3]),
        ("linear", None, [1e-3, 7.5e-4, 5e-4, 2.5e-4]),
        ("cosine", None, [1e-3, 1e-3 * (2 + 2**0.5) / 4, 5e-4, 1e-3 * (2 - 2**0.5) / 4]),
        ("linear", 2, [1e-3, 5e-4, 0.0, 0.0]),  # 0 from the horizon on
    ],
)
def test_learning_rate_schedules(schedule, decay_steps, expected):
    args = SEPOArgs(steps=4, learning_rate=1e-3, lr_schedule=schedule, lr_decay_steps=decay_steps)
    rates = [scheduled_learning_rate(args, step) for step in range(4)]
    assert rates == pytest.approx(expected, rel=1e-12, abs=1e-18)


def test_bad_schedule_settings_are_refused_naming_the_flag():
    from stratagem.errors import ConfigError
    from stratagem.settings import build

    with pytest.raises(ConfigError, match="--lr-schedule"):
        build(SEPOArgs, {"lr_schedule": "step"})
    with pytest.raises(ConfigError, match="--lr-decay-steps"):
        build(SEPOArgs, {"lr_schedule": "linear", "lr_decay_steps": 0})
    with pytest.raises(ConfigError, match="--lr-decay-steps needs a decaying"):
        SEPOArgs(lr_decay_steps=4).check()  # constant: nothing would read it
    with pytest.raises(ConfigError, match="--lr-decay-steps must be at least 1"):
        BargainingArgs(lr_schedule="cosine", lr_decay_steps=0).check()
    assert BargainingArgs(lr_schedule="cosine").fingerprint()["lr_schedule"] == "cosine"


def test_lora_wraps_no_vision_module_of_a_multimodal_model():
    from peft import LoraConfig, get_peft_model
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    config = Gemma3Config(
        text_config=dict(
            vocab_size=300,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=28,
            patch_size=14,
        ),
        mm_tokens_per_image=4,
    )
    model = Gemma3ForConditionalGeneration(config)
    bare = [n for n, _ in model.named_modules() if n.rsplit(".", 1)[-1] == "q_proj"]
    assert any("vision" in n for n in bare)  # what targets by bare name would wrap
    targets = language_model_targets(model)
    peft = get_peft_model(model, LoraConfig(r=2, target_modules=targets))
    wrapped = [n for n, m in peft.named_modules() if hasattr(m, "lora_A")]
    assert len(wrapped) == 2 * 4  # q, k, v, o of both text layers
    assert not any("vision" in n for n in wrapped)
    assert all(".language_model." in n for n in wrapped)


def test_a_text_model_keeps_every_attention_projection(tiny_args, tmp_path):
    _, policy = tiny_policy(tiny_args, tmp_path)
    wrapped = {n.rsplit(".", 1)[-1] for n, m in policy.named_modules() if hasattr(m, "lora_A")}
    count = sum(1 for _, m in policy.named_modules() if hasattr(m, "lora_A"))
    assert wrapped == {"q_proj", "k_proj", "v_proj", "o_proj"} and count == 2 * 4
