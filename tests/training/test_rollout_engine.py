"""SEPO's rollout engine: ``hf`` (the policy itself) or ``vllm`` (a vLLM engine kept in sync with
the policy's LoRA). No GPU here: the vLLM side runs on stand-ins for ``vllm.LLM`` — the char-level
fake of ``tests/scale/test_vllm.py`` for the plumbing, and ``HFEngine``, which runs the folders the
backend hands it with transformers, for the numbers: after a sync the engine samples exactly the
trainer's policy, so its rollout-time log-probs are the policy's."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest
import torch

from stratagem.backends import vllm as vllm_backend
from stratagem.backends.hf import HFBackend
from stratagem.backends.vllm import VLLMApi
from stratagem.episode import EpisodeSpec
from stratagem.errors import ConfigError
from stratagem.games import get_game
from stratagem.play import play
from stratagem.strategies import get_strategy
from stratagem.training.engines.vllm import TrainerVLLMBackend, write_base
from stratagem.training.logprobs import sequence_logprobs
from stratagem.training.policy import load_policy
from stratagem.training.sepo import trainer as sepo
from stratagem.training.sepo.trainer import SEPOArgs, train_sepo
from tests.scale.test_vllm import FAKE, FakeLoRARequest, FakeSamplingParams, chat


class HFEngine:
    """A stand-in for ``vllm.LLM`` that runs the model folder it is given with transformers, each
    request's LoRA adapter loaded with PEFT from the request's folder (cached by adapter id, as
    vLLM does). Sampling draws from a generator seeded by the request's seed; ``logprobs`` are
    those of the sampled tokens at the temperature (``processed_logprobs``)."""

    KEEP = 32  # prompt positions whose log-probs are computed

    def __init__(self, model, **kwargs):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.kwargs = {"model": model, **kwargs}
        self.base = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.adapters: dict[int, object] = {}
        self.requests: list[object] = []  # the LoRA request of every generate call

    def get_tokenizer(self):
        return self.tokenizer

    def reset_prefix_cache(self):
        pass

    def model(self, lora):
        if lora is None:
            return self.base
        if lora.lora_int_id not in self.adapters:
            from peft import PeftModel

            peft = PeftModel.from_pretrained(copy.deepcopy(self.base), lora.lora_path)
            self.adapters[lora.lora_int_id] = peft.eval()
        return self.adapters[lora.lora_int_id]

    @torch.no_grad()
    def generate(self, prompts, params, lora_request=None, use_tqdm=True):
        params = params if isinstance(params, list) else [params] * len(prompts)
        self.requests.append(lora_request)
        model = self.model(lora_request)
        return [
            self._one(model, p["prompt_token_ids"], q) for p, q in zip(prompts, params, strict=True)
        ]

    def _one(self, model, prompt, p):
        if p.prompt_logprobs is not None:
            # the backend reads the last few positions only (the scored choices): compute the
            # logits of the last KEEP positions, as vLLM would compute all of them
            keep = min(self.KEEP, len(prompt))
            logits = model(torch.tensor([prompt]), logits_to_keep=keep).logits[0].float()
            logp = torch.log_softmax(logits, -1)
            first = len(prompt) - keep  # the position logp[0] predicts from
            entries = [
                {t: SimpleNamespace(logprob=float(logp[i - 1 - first, t]))}
                if i - 1 >= first
                else None
                for i, t in enumerate(prompt)
            ]
            return SimpleNamespace(prompt_logprobs=entries, outputs=[])
        g = torch.Generator().manual_seed(p.seed or 0)
        ids, logprobs = [], []
        out = model(torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
        for _ in range(p.max_tokens):
            logits = out.logits[0, -1].float()
            if p.temperature == 0:
                token, lp = int(logits.argmax()), 0.0
            else:
                logp = torch.log_softmax(logits / p.temperature, -1)
                token = int(torch.multinomial(logp.exp(), 1, generator=g))
                lp = float(logp[token])
            ids.append(token)
            logprobs.append({token: SimpleNamespace(logprob=lp)})
            if token == self.tokenizer.eos_token_id:
                break
            out = model(
                torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True
            )
        done = SimpleNamespace(
            text=self.tokenizer.decode(ids, skip_special_tokens=True),
            token_ids=ids,
            finish_reason="stop" if ids[-1] == self.tokenizer.eos_token_id else "length",
            logprobs=logprobs if p.logprobs is not None else None,
        )
        return SimpleNamespace(outputs=[done], num_cached_tokens=0)


HF_ENGINE = VLLMApi(HFEngine, FakeSamplingParams, FakeLoRARequest)


@pytest.fixture
def vllm_here(monkeypatch):
    """Pretend vLLM and a GPU are here, with ``HFEngine`` as the engine."""
    monkeypatch.setattr(vllm_backend, "vllm_unavailable", lambda: None)
    monkeypatch.setattr(vllm_backend, "vllm_api", lambda: HF_ENGINE)


def move(policy, seed: int) -> None:
    """Stand in for an optimiser step: new random LoRA weights."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


def test_without_vllm_the_option_is_refused_before_any_model_loads(monkeypatch):
    monkeypatch.setattr(vllm_backend, "vllm_unavailable", lambda: "vLLM is not installed")
    with pytest.raises(ConfigError, match="--rollout-engine vllm: vLLM is not installed"):
        SEPOArgs(rollout_engine="vllm").check()
    SEPOArgs().check()  # hf needs nothing


def test_vllm_unavailable_names_the_install_or_the_gpu():
    import importlib.util

    reason = vllm_backend.vllm_unavailable()
    if importlib.util.find_spec("vllm") is None:
        assert "pip install 'stratagem[vllm]'" in reason
    elif not torch.cuda.is_available():
        assert "CUDA GPU" in reason
    else:
        assert reason is None


slow = pytest.mark.slow  # the tests below load the tiny model


@slow
def test_hf_is_the_default_rollout_engine(tiny_args, tmp_path):
    args = tiny_args(tmp_path).resolved()
    policy, tokenizer = load_policy(args)
    agent = sepo.rollout_agent(policy, tokenizer, get_game("kuhn"), args)
    assert isinstance(agent.backend, HFBackend) and agent.backend.model is policy
    assert agent.sampling.temperature == args.temperature and agent.fallback == "sample"


@slow
def test_the_base_is_written_with_the_sft_adapter_merged(
    tiny_args, tiny_model, sft_adapter, tmp_path
):
    """Naive equivalent: load the base, merge the SFT adapter; the written folder gives the same
    logits, holds no LoRA tensors, and the policy's own LoRA is not in it."""
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    args = tiny_args(tmp_path / "run", adapter=sft_adapter).resolved()
    policy, tokenizer = load_policy(args)
    move(policy, 0)  # SEPO's LoRA moved: the base must not include it
    write_base(policy, tokenizer, tmp_path / "base")
    assert not [k for k in load_file(tmp_path / "base/model.safetensors") if "lora" in k]
    written = AutoModelForCausalLM.from_pretrained(tmp_path / "base", dtype=torch.float32)
    naive = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model), sft_adapter
    ).merge_and_unload()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        want = naive(input_ids=ids).logits
        assert torch.allclose(written(input_ids=ids).logits, want, atol=1e-5)
        assert not torch.allclose(policy(input_ids=ids).logits, want, atol=1e-3)
    assert (tmp_path / "base/tokenizer_config.json").exists()


@slow
def test_each_sync_saves_the_adapter_and_loads_it_under_a_new_id(tiny_args, tmp_path):
    from safetensors.torch import load_file

    args = tiny_args(tmp_path).resolved()
    policy, tokenizer = load_policy(args)
    folder = tmp_path / "rollout"
    backend = TrainerVLLMBackend(
        policy, tokenizer, folder, model="served/model", lora_rank=4, seed=3, api=FAKE
    )
    kwargs = backend.engine.kwargs
    assert kwargs["model"] == "served/model" and kwargs["enable_lora"]
    assert kwargs["logprobs_mode"] == "processed_logprobs" and kwargs["max_lora_rank"] == 8
    assert not (folder / "base").exists()  # a served model is not written again
    backend.generate([chat("a")], backend_sampling())
    assert backend.engine.calls[-1][2] == FakeLoRARequest(
        "adapter-1", 1, str(folder / "adapters/adapter-1")
    )
    for step in (2, 3):
        move(policy, step)
        backend.reset_prefix_cache()  # what the trainer calls after each step
        backend.generate([chat("a")], backend_sampling())
        path = folder / f"adapters/adapter-{step}"
        assert backend.engine.calls[-1][2] == FakeLoRARequest(f"adapter-{step}", step, str(path))
        saved = load_file(path / "adapter_model.safetensors")
        mine = {k: v for k, v in policy.state_dict().items() if "lora_" in k}
        assert len(saved) == len(mine) > 0
        for key, value in saved.items():  # PEFT drops the adapter name from saved keys
            assert torch.equal(value, mine[key.replace(".weight", ".default.weight")]), key
    assert sorted(p.name for p in (folder / "adapters").iterdir()) == ["adapter-2", "adapter-3"]
    assert (
        TrainerVLLMBackend(
            policy, tokenizer, folder, model="m", lora_rank=20, api=FAKE
        ).engine.kwargs["max_lora_rank"]
        == 32
    )
    with pytest.raises(ConfigError, match="LoRA ranks up to 512"):
        TrainerVLLMBackend(policy, tokenizer, folder, model="m", lora_rank=600, api=FAKE)


def backend_sampling():
    from stratagem.backends.base import Sampling

    return Sampling(temperature=1.0, max_new_tokens=4)


@slow
def test_vllm_rollouts_sample_the_synced_policy(tiny_args, sft_adapter, tmp_path, vllm_here):
    """The engine serves the written base (SFT merged) + the synced LoRA: every rollout-time
    log-prob equals the trainer policy's at the sampling temperature, a seat's turns continue one
    token sequence (packing reads each episode once), and a stale adapter would be caught."""
    args = tiny_args(
        tmp_path, adapter=sft_adapter, game="ipd", lora_dropout=0.0, rollout_engine="vllm"
    ).resolved()
    game = get_game(args.game)
    policy, tokenizer = load_policy(args)
    policy.eval()
    agent = sepo.rollout_agent(policy, tokenizer, game, args)
    assert isinstance(agent.backend, TrainerVLLMBackend)
    assert agent.backend.engine.kwargs["model"] == str(tmp_path / "rollout/base")
    opponent = get_strategy("ipd", "TitForTat")

    def old_and_new():
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
        assert continued >= 2 * (game.rounds - 1)  # every later round continues the sequence
        return torch.tensor(old), torch.cat(new)

    move(policy, 7)  # a training step
    agent.backend.reset_prefix_cache()  # the loop's call before each step's rollouts
    old, new = old_and_new()
    assert torch.allclose(old, new, atol=1e-4)
    move(policy, 8)  # the next step, without a sync: the engine still samples the old adapter
    old, new = old_and_new()
    assert not torch.allclose(old, new, atol=1e-2)


@slow
def test_train_sepo_runs_its_rollouts_on_the_vllm_engine(
    tiny_args, tmp_path, vllm_here, monkeypatch
):
    monkeypatch.setattr(
        sepo, "groups_for", lambda game, mode, pools=None: [("train", "NashApprox")]
    )
    logs = []
    args = tiny_args(
        tmp_path / "run", steps=2, rollout_engine="vllm", lora_dropout=0.0, learning_rate=0.05
    )
    train_sepo(args, log=logs.append)
    steps = [json.loads(x) for x in logs if x.startswith("{") and "ratio_max_dev" in x]
    assert [s["step"] for s in steps] == [1, 2]
    # rollout-time log-probs come from the engine; they equal the policy's only if step 2's
    # rollouts used the adapter step 1 trained
    assert all(s["ratio_max_dev"] < 1e-4 and s["samples"] > 0 for s in steps)
    adapters = sorted(p.name for p in (tmp_path / "run/rollout/adapters").iterdir())
    assert adapters == ["adapter-2", "adapter-3"]  # built, then synced before each step
    assert (tmp_path / "run/checkpoint-2/COMPLETE").exists()
