"""``--rollout-engine llamacpp``: llama.cpp on the CPU serving the trainer's policy (base with the
SFT adapter merged, converted to GGUF once; the LoRA converted and applied before each step),
checked against the policy itself on the tiny random Llama."""

from __future__ import annotations

import json

import pytest
import torch

from stratagem.backends.llamacpp.engine import llamacpp_unavailable
from stratagem.episode import EpisodeSpec
from stratagem.errors import ConfigError
from stratagem.games import get_game
from stratagem.play import play
from stratagem.strategies import get_strategy
from stratagem.training import engines
from stratagem.training.bargaining.trainer import BargainingArgs
from stratagem.training.logprobs import sequence_logprobs
from stratagem.training.policy import load_policy
from stratagem.training.sepo import trainer as sepo
from stratagem.training.sepo.trainer import SEPOArgs, train_sepo
from tests.training.test_rollout_engine import move

pytestmark = pytest.mark.skipif(
    llamacpp_unavailable() is not None, reason="llama-cpp-python is not installed"
)


def test_the_option_is_refused_in_one_line_where_it_cannot_run(monkeypatch, tmp_path):
    from stratagem.backends.llamacpp import engine as llamacpp_engine

    monkeypatch.setattr(llamacpp_engine, "llamacpp_unavailable", lambda: "not installed")
    with pytest.raises(ConfigError, match="--rollout-engine llamacpp: not installed"):
        SEPOArgs(rollout_engine="llamacpp").check()
    with pytest.raises(ConfigError, match="--rollout-engine llamacpp: not installed"):
        BargainingArgs(rollout_engine="llamacpp").check()
    monkeypatch.undo()
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
    )
    with pytest.raises(ConfigError, match="--rollout-engine llamacpp: .* not GPT2LMHeadModel"):
        SEPOArgs(rollout_engine="llamacpp", model=str(tmp_path)).check()
    SEPOArgs(rollout_engine="llamacpp").check()  # the embedded SmolLM2 converts


def test_the_default_engine_leaves_old_fingerprints_alone():
    assert "rollout_engine" not in SEPOArgs().fingerprint()
    assert SEPOArgs(rollout_engine="llamacpp").fingerprint()["rollout_engine"] == "llamacpp"
    assert "rollout_engine" not in BargainingArgs().fingerprint()


def test_threads_change_speed_not_results(tiny_args, tmp_path):
    """``--threads`` stays out of the fingerprint: the policy's log-probs are the same at one and
    two threads, and its gradients agree to float32 rounding — bit-equal on some CPUs, not on all,
    since the backward pass may split a sum across threads (llama.cpp's logits:
    ``test_thread_counts_change_no_logit``)."""
    assert SEPOArgs(threads=1).fingerprint() == SEPOArgs().fingerprint()
    policy, _ = load_policy(tiny_args(tmp_path, lora_dropout=0.0).resolved())
    move(policy, 3)
    before = torch.get_num_threads()
    seen = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            policy.zero_grad()
            logps = sequence_logprobs(policy, list(range(5, 60)), list(range(30, 55)))
            logps.sum().backward()
            grads = [p.grad.clone() for p in policy.parameters() if p.requires_grad]
            seen.append((logps.detach(), grads))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(seen[0][0], seen[1][0])
    for a, b in zip(seen[0][1], seen[1][1], strict=True):  # measured: |Δ| ≤ 1.2e-6 of up to 2.9
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def policy_logits(policy, ids):
    with torch.no_grad():
        return policy(input_ids=torch.tensor([ids])).logits[0, -1]


def engine_logits(backend, ids):
    backend.engine.clear()
    return torch.from_numpy(backend.engine.prefill([ids], [len(ids) - 1])[1][0][0])


def test_the_engine_serves_the_policy_and_follows_its_lora(tiny_args, sft_adapter, tmp_path):
    """The base carries the SFT adapter merged, the LoRA arrives at each sync: the engine's
    logits are the policy's after a sync, and a stale adapter is caught."""
    from stratagem.training.engines.llamacpp import TrainerLlamaCppBackend

    args = tiny_args(tmp_path, adapter=sft_adapter, lora_dropout=0.0).resolved()
    policy, tokenizer = load_policy(args)
    policy.eval()
    move(policy, 1)
    backend = TrainerLlamaCppBackend(
        policy, tokenizer, tmp_path / "rollout", model_id="t", kv_dtype="f32", threads=1
    )
    ids = [1, 5, 6, 7, 8, 9, 10, 11]
    assert torch.allclose(engine_logits(backend, ids), policy_logits(policy, ids), atol=2e-3)
    with policy.disable_adapter():  # the LoRA matters: without it the logits differ
        assert not torch.allclose(policy_logits(policy, ids), engine_logits(backend, ids), atol=0.1)
    move(policy, 2)  # a training step
    stale = engine_logits(backend, ids)
    assert not torch.allclose(stale, policy_logits(policy, ids), atol=0.1)
    backend.reset_prefix_cache()  # the loop's call before each step's rollouts
    assert torch.allclose(engine_logits(backend, ids), policy_logits(policy, ids), atol=2e-3)
    assert [p.name for p in (tmp_path / "rollout/adapters").iterdir()] == ["adapter-2.gguf"]


@pytest.mark.slow
def test_rollouts_carry_the_policys_ids_and_log_probs(tiny_args, tmp_path):
    """As the hf backend's: a seat's turns continue one token sequence (packing reads each
    episode once) and the rollout-time log-probs are the policy's at the temperature."""
    args = tiny_args(tmp_path, game="ipd", lora_dropout=0.0, rollout_engine="llamacpp")
    args = args.resolved()
    game = get_game(args.game)
    policy, tokenizer = load_policy(args)
    policy.eval()
    move(policy, 7)
    agent = sepo.rollout_agent(policy, tokenizer, game, args)
    assert type(agent.backend).__name__ == "TrainerLlamaCppBackend"
    assert agent.backend.engine.adapter  # the LoRA is applied
    opponent = get_strategy("ipd", "TitForTat")
    specs = [EpisodeSpec(f"e{i}", i, (agent, opponent), {"seat": 0}) for i in range(2)]
    old, new, continued = [], [], 0
    for trace in play(game, specs):
        before: list[int] = []
        for d in trace.decisions:
            if d.seat != 0 or not (d.info or {}).get("token_ids"):
                continue
            prompt, ids = d.info["prompt_ids"], d.info["token_ids"]
            continued += bool(before) and prompt[: len(before)] == before
            before = prompt + ids
            old += d.info["token_logprobs"]
            positions = list(range(len(prompt), len(prompt) + len(ids)))
            with torch.no_grad():
                new.append(
                    sequence_logprobs(policy, before, positions, temperature=args.temperature)
                )
    assert continued >= 2 * (game.rounds - 1)
    assert torch.allclose(torch.tensor(old), torch.cat(new), atol=2e-3)


@pytest.mark.slow
def test_train_sepo_runs_its_rollouts_on_llamacpp(tiny_args, tmp_path, monkeypatch):
    monkeypatch.setattr(
        sepo, "groups_for", lambda game, mode, pools=None: [("train", "NashApprox")]
    )
    logs: list[str] = []
    args = tiny_args(
        tmp_path / "run",
        steps=2,
        rollout_engine="llamacpp",
        lora_dropout=0.0,
        learning_rate=0.05,
        threads=1,
    )
    before = torch.get_num_threads()
    try:
        train_sepo(args, log=logs.append)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    steps = [json.loads(x) for x in logs if x.startswith("{") and "ratio_max_dev" in x]
    assert [s["step"] for s in steps] == [1, 2] and all(s["samples"] > 0 for s in steps)
    # the rollout-time log-probs come from llama.cpp; they are the policy's at step 2 only if
    # step 2's rollouts used the adapter step 1 trained
    assert all(s["rollout_logprob_max_dev"] < 5e-3 for s in steps)
    assert [p.name for p in (tmp_path / "run/rollout/adapters").iterdir()] == ["adapter-3.gguf"]
    assert (tmp_path / "run/rollout/base-f32.gguf").exists()
    assert (tmp_path / "run/checkpoint-2/COMPLETE").exists()


def test_bargaining_grpo_takes_the_engine(tiny_args, tmp_path):
    from stratagem.training.bargaining.trainer import BargainingTask

    args = BargainingArgs(
        model=tiny_args(tmp_path).model,
        out=tmp_path,
        rollout_engine="llamacpp",
        eval_gft=0,
        eval_ngft=0,
        lora_rank=4,
        max_new_tokens=4,
    )
    policy, tokenizer = load_policy(args)
    task = BargainingTask(args)
    task.start(policy, tokenizer)
    assert type(task.backend).__name__ == "TrainerLlamaCppBackend"
    assert engines.rollout_backend(policy, tokenizer, args, "b").model_id == "b"
