"""A tiny random Llama with the embedded model's tokenizer: real SEPO code paths in seconds."""

from __future__ import annotations

import pytest
import torch

from stratagem.training.sepo.trainer import SEPOArgs
from tests.tiny_models import tiny_llama_config


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from transformers import AutoTokenizer, LlamaForCausalLM

    from stratagem.backends.embedded import embedded_dir

    path = tmp_path_factory.mktemp("tiny")
    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    config = tiny_llama_config(tokenizer, tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture
def tiny_args(tiny_model):
    """SEPO settings for the tiny model (a few seconds a step); keywords override them."""

    def make(out, **overrides) -> SEPOArgs:
        settings = dict(
            game="kuhn",
            model=tiny_model,
            out=out,
            steps=6,
            rollouts=2,
            max_new_tokens=6,
            checkpoint_every=2,
            eval_episodes=0,
            lora_rank=4,
            lora_alpha=8,
            learning_rate=1e-3,
        )
        return SEPOArgs(**{**settings, **overrides})

    return make


@pytest.fixture
def sft_adapter(tiny_model, tmp_path):
    """A non-zero "trained" SFT adapter on the tiny model (so merging it matters)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    sft = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    sft.save_pretrained(tmp_path / "sft")
    return str(tmp_path / "sft")


@pytest.fixture
def demonstrated_contexts(monkeypatch) -> list:
    """The scenario (DoND context) of every game ``training.sft.data`` plays, in order."""
    from stratagem.training.sft import data as sft_data

    played: list = []
    real_play = sft_data.play

    def recording_play(game, specs, **kw):
        specs = list(specs)
        played.extend(s.scenario for s in specs)
        return real_play(game, specs, **kw)

    monkeypatch.setattr(sft_data, "play", recording_play)
    return played
