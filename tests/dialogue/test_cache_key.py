"""The response cache's key names the exact model (RELIABILITY C1): a model retrained at the
same path, another adapter or another dtype misses the cache."""

from __future__ import annotations

import shutil

import pytest

from stratagem.backends.base import Sampling
from stratagem.backends.cache import CachedBackend, weights_fingerprint
from stratagem.backends.scripted import ScriptedBackend

CHAT = [{"role": "user", "content": "Hello"}]


def test_fingerprint_follows_weights_adapters_and_dtype(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights v1")
    (model / "config.json").write_text("{}")
    (model / "notes.md").write_text("not a weights file")
    first = weights_fingerprint(model, dtype="float32")
    assert weights_fingerprint(model, dtype="float32") == first
    (model / "notes.md").write_text("edited")
    assert weights_fingerprint(model, dtype="float32") == first
    (model / "model.safetensors").write_bytes(b"weights v2")  # retrained at the same path
    second = weights_fingerprint(model, dtype="float32")
    assert second != first
    assert weights_fingerprint(model, dtype="bfloat16") != second
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"lora")
    with_adapter = weights_fingerprint(model, [adapter], dtype="float32")
    assert with_adapter != second
    (adapter / "adapter_model.safetensors").write_bytes(b"lora, trained more")
    assert weights_fingerprint(model, [adapter], dtype="float32") != with_adapter


def test_same_model_id_other_fingerprint_misses_the_cache(tmp_path):
    old, new = ScriptedBackend(lambda chat: "old"), ScriptedBackend(lambda chat: "new")
    old.fingerprint, new.fingerprint = "m#aaa", "m#bbb"  # one model id, other weights
    assert old.model_id == new.model_id
    path = tmp_path / "c.sqlite"
    assert CachedBackend(old, path).generate([CHAT], Sampling())[0].text == "old"
    assert CachedBackend(new, path).generate([CHAT], Sampling())[0].text == "new"
    assert new.calls == [1]


def test_hf_model_retrained_at_the_same_path_misses_the_cache(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from stratagem.backends.embedded import embedded_dir
    from stratagem.backends.hf import HFBackend

    source = embedded_dir()
    folder = tmp_path / "tiny"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (source / name).exists():
            shutil.copy(source / name, folder / name)
    config = transformers.LlamaConfig(
        vocab_size=49152,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    sampling = Sampling(max_new_tokens=2)
    path = tmp_path / "c.sqlite"
    first = CachedBackend(HFBackend(str(folder), dtype="float32", device="cpu"), path)
    first.generate([CHAT], sampling)
    again = CachedBackend(HFBackend(str(folder), dtype="float32", device="cpu"), path)
    again.generate([CHAT], sampling)
    assert again.usage.calls == 0  # the same weights: a hit
    torch.manual_seed(1)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)  # retrained in place
    retrained = CachedBackend(HFBackend(str(folder), dtype="float32", device="cpu"), path)
    assert retrained.model_id == first.model_id and retrained.fingerprint != first.fingerprint
    retrained.generate([CHAT], sampling)
    assert retrained.usage.calls == 1  # a miss: the old text is not served
