"""Agent specs: a local model spec may carry its own adapter (``hf@FOLDER``), so a self-play
checkpoint plays another model from the command line."""

from __future__ import annotations

import json
import re

import pytest
import torch
from typer.testing import CliRunner

from stratagem.agents.spec import LLMOptions, agent_kind, is_llm, make_agent, own_adapter
from stratagem.cli.main import app
from stratagem.errors import ConfigError
from tests.tiny_models import SMALLER, tiny_llama_config


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random Llama and a LoRA adapter laid out as ``train selfplay`` writes one."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, LlamaForCausalLM

    from stratagem.backends.embedded import embedded_dir

    root = tmp_path_factory.mktemp("selfplay")
    tokenizer = AutoTokenizer.from_pretrained(embedded_dir())
    config = tiny_llama_config(tokenizer, **SMALLER)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    get_peft_model(model, lora).save_pretrained(root / "checkpoint-2" / "adapter")
    return root


def test_kinds_and_the_adapter_after_the_at_sign():
    assert [agent_kind(s) for s in ("hf", "hf@a", "hf:m@a", "vllm@a", "openai:x@y")] == [
        "hf",
        "hf",
        "hf",
        "vllm",
        "openai",
    ]
    assert is_llm("hf@runs/x") and not is_llm("strategy:FairSplit")
    base = LLMOptions(adapter="sft")
    assert own_adapter("hf:m@a+b", base) == ("hf:m", LLMOptions(adapter="a,b"))
    assert own_adapter("hf", base) == ("hf", base)
    assert own_adapter("openai:m@x", base) == ("openai:m@x", base)  # a model name, untouched
    with pytest.raises(ConfigError, match="name an adapter folder after '@'"):
        own_adapter("hf@", base)


def test_a_self_play_checkpoint_plays_another_model_in_a_tournament(checkpoint, tmp_path):
    # regression: --adapter applied to every model agent, so a checkpoint could not meet a model
    # without it from the command line
    base, adapter = checkpoint / "base", checkpoint / "checkpoint-2" / "adapter"
    agents = f"hf:{base}@{adapter},hf:{base}"
    out = tmp_path / "run"
    args = ["tournament", "--game", "dond", "--agents", agents, "-n", "1"]
    result = CliRunner().invoke(app, [*args, "--max-new-tokens", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    pairs = {tuple(t["agents"]) for t in traces}
    steered, plain = f"llm:{base}+{adapter}", f"llm:{base}"
    assert pairs == {(steered, plain), (plain, steered), (steered, steered), (plain, plain)}
    missing = CliRunner().invoke(app, [*args[:4], f"hf:{base}@{tmp_path}/none,FairSplit"])
    assert "no such adapter folder" in str(missing.exception)


def test_an_adapter_in_the_spec_replaces_the_shared_one(checkpoint):
    base, adapter = checkpoint / "base", checkpoint / "checkpoint-2" / "adapter"
    options = LLMOptions(adapter=str(checkpoint / "elsewhere"), max_new_tokens=2)
    agent = make_agent(f"hf:{base}@{adapter}", "dond", options)
    assert agent.backend.model_id == f"{base}+{adapter}"


def test_an_agent_spec_is_parsed_once_into_its_parts():
    from stratagem.agents.spec import AgentSpec, LLMOptions
    from stratagem.errors import ConfigError, UnknownNameError

    assert AgentSpec.parse("strategy:TitForTat") == AgentSpec(
        "strategy:TitForTat", "strategy", "TitForTat"
    )
    assert AgentSpec.parse("hf") == AgentSpec("hf", "hf")
    spec = AgentSpec.parse("hf:org/model@runs/a+runs/b")
    assert (spec.kind, spec.name, spec.adapter, spec.is_llm) == (
        "hf",
        "org/model",
        "runs/a,runs/b",
        True,
    )
    options = spec.llm_options(LLMOptions(adapter="runs/ignored"))
    assert options.adapter == "runs/a,runs/b"  # the spec's own adapter wins
    assert AgentSpec.parse("openai:gpt-4o-mini").llm_options(LLMOptions()) == LLMOptions()
    for bad, error, message in [
        ("gemini:pro", UnknownNameError, "agent kind"),
        ("strategy:", ConfigError, "needs a name after 'strategy:'"),
        ("openai:", ConfigError, "needs a model name"),
        ("hf@", ConfigError, "name an adapter folder after '@'"),
    ]:
        with pytest.raises(error, match=re.escape(message)):
            AgentSpec.parse(bad)
