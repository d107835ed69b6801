"""A llama.cpp engine sampling a trainer's rollouts on the CPU (``--rollout-engine llamacpp``).

The contract, as ``engines.vllm`` on a GPU:

- transformers keeps the policy and computes the gradients; the engine only samples;
- the engine serves the policy's own frozen base weights — any starting (SFT) adapter merged,
  the trained LoRA left out — converted once per run to an unquantised GGUF
  (``folder/base-<dtype>.gguf``; f32 by default, the CPU policy's own dtype), never the shipped
  quantised GGUF, so it samples the same policy;
- ``sync`` writes the policy's current LoRA as a GGUF LoRA adapter
  (``folder/adapters/adapter-N.gguf``) and applies it; the trainer calls
  ``reset_prefix_cache`` whenever its weights change (before each step's rollouts), which syncs
  and forgets every cached prompt;
- generations carry ``prompt_ids`` and ``token_ids`` in the transformers tokenizer's ids (the
  engine is given and returns ids; the vocabularies are the same), a seat's next prompt
  continues from the exact ids it was given and sampled, and ``token_logprobs`` are the sampled
  tokens' log-probabilities at the sampling temperature from llama.cpp's logits. The update
  takes its ratio's old log-probs from its own first forward, so these are only compared
  (``rollout_logprob_max_dev``: the engines' numerical difference, ~1e-3 in f32).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stratagem.backends.llamacpp import LlamaCppBackend
from stratagem.training.engines.gguf import GGUFDtype, write_lora_gguf, write_model_gguf

__all__ = ["TrainerLlamaCppBackend", "base_state", "lora_state"]


class TrainerLlamaCppBackend(LlamaCppBackend):
    """A llama.cpp engine that samples a trainer's PEFT policy (see the module docstring).

    Args:
        policy: the trainer's PEFT model (its active adapter is what ``sync`` applies).
        tokenizer: the policy's tokenizer.
        folder: where the GGUF base and adapters go (inside the run folder).
        model_id: the backend's name in traces.
        dtype: the GGUF base's weights (``f32``, ``f16`` or ``bf16``).
        threads: CPU threads (default: torch's).
        **engine_args: as for ``LlamaCppEngine`` (``n_ctx``, ``kv_dtype``, ...).
    """

    def __init__(
        self,
        policy: Any,
        tokenizer: Any,
        folder: Path,
        *,
        model_id: str,
        dtype: GGUFDtype = "f32",
        threads: int | None = None,
        max_batch: int = 64,
        **engine_args: Any,
    ):
        import torch

        self.policy = policy
        self.folder = Path(folder)
        base = self.folder / f"base-{dtype}.gguf"
        tmp = base.with_name(f"{base.name}.tmp{os.getpid()}")
        write_model_gguf(base_state(policy), policy.config, tokenizer, tmp, dtype=dtype)
        tmp.replace(base)
        stop = getattr(getattr(policy, "generation_config", None), "eos_token_id", None)
        super().__init__(
            base,
            tokenizer,
            model_id=model_id,
            stop_ids=stop if isinstance(stop, list) else [stop] if stop is not None else [],
            max_batch=max_batch,
            return_ids=True,
            threads=threads or torch.get_num_threads(),
            **engine_args,
        )
        self._synced = 0
        self.sync()

    def sync(self) -> None:
        """Write the policy's current LoRA as a GGUF adapter and apply it from the next request
        on (every cached prompt is forgotten); keep only the newest adapter file."""
        self._synced += 1
        path = self.folder / "adapters" / f"adapter-{self._synced}.gguf"
        tensors, scaling = lora_state(self.policy)
        write_lora_gguf(tensors, self.policy.config, scaling, path)
        self.engine.set_lora(path)
        (self.folder / "adapters" / f"adapter-{self._synced - 1}.gguf").unlink(missing_ok=True)

    def reset_prefix_cache(self) -> None:
        """The trainer's weights changed: ``sync``, then forget the chats' token ids."""
        self.sync()
        super().reset_prefix_cache()


def base_state(policy: Any) -> dict[str, Any]:
    """A PEFT ``policy``'s frozen base weights by transformers name: its LoRA layers left out,
    so any adapter merged into the base stays merged (as ``engines.vllm.write_base`` writes)."""
    return {
        name.replace(".base_layer.", "."): tensor
        for name, tensor in policy.get_base_model().state_dict().items()
        if ".lora_" not in name
    }


def lora_state(policy: Any) -> tuple[dict[str, Any], float]:
    """The policy's active LoRA weights (PEFT's saved names) and its scaling (α / r, or
    α / √r with rsLoRA).

    Raises:
        ConfigError: per-module ranks or α, which one scaling cannot express.
    """
    from peft import get_peft_model_state_dict

    from stratagem.errors import ConfigError

    config = policy.peft_config[policy.active_adapter]
    if config.rank_pattern or config.alpha_pattern:
        raise ConfigError("the llama.cpp rollout engine needs one LoRA rank and α for all modules")
    root = config.r**0.5 if config.use_rslora else config.r
    return get_peft_model_state_dict(policy), config.lora_alpha / root
