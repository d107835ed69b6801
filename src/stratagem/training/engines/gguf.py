"""Writing a transformers policy as GGUF for llama.cpp: its weights, and its LoRA as a GGUF
LoRA adapter (what ``engines.llamacpp`` serves).

The weights are written unquantised (f32, f16 or bf16), so llama.cpp serves the same policy the
trainer holds, not a quantised copy. Tensor names come from the ``gguf`` package's name map.
llama.cpp's ``llama`` architecture rotates query and key dimensions in interleaved pairs where
transformers rotates the two halves, so the query and key rows are permuted on the way (as
llama.cpp's ``convert_hf_to_gguf.py`` does); the rows of a LoRA's B matrix on those
projections follow the same permutation. ``qwen2`` rotates halves in both and is written as is.

The vocabulary is written so llama.cpp loads the file, but the engine never tokenizes with it:
it is given the transformers tokenizer's ids and returns ids, so the two always agree.

Naive equivalent: llama.cpp's ``convert_hf_to_gguf.py`` and ``convert_lora_to_gguf.py`` on a
saved folder; ``tests/backends/test_llamacpp.py`` checks the written model's logits against
transformers'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from stratagem.errors import ConfigError

GGUFDtype = Literal["f32", "f16", "bf16"]
ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}
PERMUTED = {"llama"}  # architectures whose query/key rows are permuted (interleaved rotary)


def architecture(config: Any) -> str:
    """The GGUF architecture name of a transformers ``config``.

    Raises:
        ConfigError: an architecture this converter does not write, or rotary scaling.
    """
    names = getattr(config, "architectures", None) or []
    arch = next((ARCHITECTURES[n] for n in names if n in ARCHITECTURES), None)
    if arch is None:
        raise ConfigError(
            f"the llama.cpp rollout engine converts {', '.join(ARCHITECTURES)} models, "
            f"not {', '.join(names) or config.model_type}"
        )
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise ConfigError(f"the llama.cpp rollout engine does not convert rotary scaling {rope}")
    return arch


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """Rows of a query/key projection (or its bias or LoRA B) from transformers' half-split
    rotary layout to llama.cpp's interleaved one."""
    shape = weights.shape
    return (
        weights.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)
    )


def _head_dim(config: Any) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _gguf_names(config: Any, arch: str) -> Any:
    import gguf

    kind = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2}[arch]
    return gguf.get_tensor_name_map(kind, config.num_hidden_layers)


def _rows_permuted(name: str, config: Any, arch: str) -> int | None:
    """How many heads a tensor's rows are permuted by (query: all heads, key: the key-value
    heads), or None when its rows stay."""
    if arch not in PERMUTED:
        return None
    if ".q_proj." in name or name.endswith(".q_proj"):
        return config.num_attention_heads
    if ".k_proj." in name or name.endswith(".k_proj"):
        return getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return None


def write_model_gguf(
    state: Mapping[str, Any],
    config: Any,
    tokenizer: Any,
    path: str | Path,
    *,
    dtype: GGUFDtype = "f32",
) -> Path:
    """Write a causal LM's ``state`` (transformers names, torch tensors) as a GGUF model file.

    Matrices are stored in ``dtype``; norms and biases in f32. A tied output head is left out
    (llama.cpp then reads the token embeddings).

    Raises:
        ConfigError: an architecture or tensor the converter does not know.
    """
    import gguf
    import torch

    arch = architecture(config)
    names = _gguf_names(config, arch)
    qtype = {
        "f32": gguf.GGMLQuantizationType.F32,
        "f16": gguf.GGMLQuantizationType.F16,
        "bf16": gguf.GGMLQuantizationType.BF16,
    }[dtype]
    file_type = {"f32": 0, "f16": 1, "bf16": 32}[dtype]  # gguf.LlamaFileType
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    _write_hparams(writer, config, file_type)
    _write_vocab(writer, tokenizer, config.vocab_size)
    tied = getattr(config, "tie_word_embeddings", False)
    for key, tensor in state.items():
        if tied and key == "lm_head.weight":
            continue
        base, _, suffix = key.rpartition(".")
        gguf_name = names.get_name(base)
        if gguf_name is None:
            raise ConfigError(f"the llama.cpp rollout engine has no GGUF name for {key}")
        data = tensor.detach().to(torch.float32).cpu().numpy()
        heads = _rows_permuted(key, config, arch)
        if heads is not None:
            data = _permute(data, heads)
        target = qtype if data.ndim == 2 else gguf.GGMLQuantizationType.F32
        writer.add_tensor(
            f"{gguf_name}.{suffix}", gguf.quants.quantize(data, target), raw_dtype=target
        )
    _finish(writer)
    return path


def write_lora_gguf(lora: Mapping[str, Any], config: Any, scaling: float, path: str | Path) -> Path:
    """Write a PEFT LoRA (``get_peft_model_state_dict`` names: ``…q_proj.lora_A.weight``) as a
    GGUF LoRA adapter for a model written by ``write_model_gguf``.

    ``scaling`` (PEFT's α / r) is folded into B and the adapter's α is set to its rank, so
    llama.cpp applies ``x Aᵀ Bᵀ · scaling`` exactly as PEFT does at inference.

    Raises:
        ConfigError: an architecture or tensor the converter does not know.
    """
    import gguf
    import torch

    arch = architecture(config)
    names = _gguf_names(config, arch)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    rank = 0
    for key, tensor in sorted(lora.items()):
        module, part = _lora_key(key)
        gguf_name = names.get_name(module.removeprefix("base_model.model."))
        if gguf_name is None:
            raise ConfigError(f"the llama.cpp rollout engine has no GGUF name for {key}")
        data = tensor.detach().to(torch.float32).cpu().numpy()
        if part == "b":
            data = data * scaling
            heads = _rows_permuted(module, config, arch)
            if heads is not None:
                data = _permute(data, heads)
        else:
            rank = data.shape[0]
        writer.add_tensor(f"{gguf_name}.weight.lora_{part}", np.ascontiguousarray(data))
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(rank))
    _finish(writer)
    return path


def _lora_key(key: str) -> tuple[str, str]:
    """(module name, ``a`` or ``b``) of a PEFT LoRA state key.

    Raises:
        ConfigError: not a LoRA A/B weight (e.g. a bias, or an embedding adapter).
    """
    for part in ("A", "B"):
        marker = f".lora_{part}."
        if marker in key and key.endswith(".weight"):
            return key.split(marker)[0], part.lower()
    raise ConfigError(f"the llama.cpp rollout engine converts LoRA A/B weights only, not {key}")


def _write_hparams(writer: Any, config: Any, file_type: int) -> None:
    heads = config.num_attention_heads
    head_dim = _head_dim(config)
    rope = getattr(config, "rope_parameters", None) or {}
    writer.add_name(str(getattr(config, "_name_or_path", "") or config.model_type))
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(getattr(config, "num_key_value_heads", None) or heads)
    writer.add_rope_freq_base(float(rope.get("rope_theta", getattr(config, "rope_theta", 1e4))))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_rope_dimension_count(head_dim)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(file_type)


def _write_vocab(writer: Any, tokenizer: Any, vocab_size: int) -> None:
    """The tokenizer's tokens by id (a byte-level BPE's merges too), padded to the model's
    vocabulary size, so llama.cpp loads the file; it never tokenizes with them."""
    import gguf

    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    model = backend["model"]
    if model.get("type") != "BPE":
        raise ConfigError(
            f"the llama.cpp rollout engine writes byte-level BPE vocabularies, not {model['type']}"
        )
    special = set(tokenizer.all_special_ids)
    added = {t["id"] for t in backend.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(vocab_size):
        token = tokenizer.convert_ids_to_tokens(i) if i < len(tokenizer) else None
        if token is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        tokens.append(token)
        if i in special:
            types.append(gguf.TokenType.CONTROL)
        elif i in added:
            types.append(gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for kind in ("bos", "eos", "pad", "unk"):
        token_id = getattr(tokenizer, f"{kind}_token_id", None)
        if token_id is not None:
            {
                "bos": writer.add_bos_token_id,
                "eos": writer.add_eos_token_id,
                "pad": writer.add_pad_token_id,
                "unk": writer.add_unk_token_id,
            }[kind](token_id)
    writer.add_add_bos_token(False)


def _finish(writer: Any) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
