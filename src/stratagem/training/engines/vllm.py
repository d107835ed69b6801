"""A vLLM engine sampling a trainer's rollouts (SEPO's ``--rollout-engine vllm``).

Transformers keeps the policy and computes the gradients; the engine serves the base weights
(with the SFT adapter merged, written once by ``write_base``) and the policy's LoRA, saved and
reloaded under a new id whenever the trainer's weights change. Each generation then carries the
prompt and answer token ids and the sampled tokens' log-probabilities at the sampling
temperature (``logprobs_mode="processed_logprobs"``), and a seat's next prompt continues from
the exact ids it was given and sampled, as ``hf`` does.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from stratagem.backends.chains import Chains
from stratagem.backends.vllm import VLLMApi, VLLMBackend
from stratagem.errors import ConfigError

__all__ = ["LORA_RANKS", "TrainerVLLMBackend", "write_base"]

LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)  # the max_lora_rank values vLLM accepts


class TrainerVLLMBackend(VLLMBackend):
    """A vLLM engine that samples a trainer's PEFT policy (SEPO's ``--rollout-engine vllm``).

    The trainer keeps the policy in transformers and computes the gradients there; this engine
    only samples. It serves ``model`` (a hub id or folder; ``None``: the policy's own frozen base
    weights, written once to ``folder/base`` by ``write_base``, which is how an SFT adapter
    merged into the base reaches vLLM) and applies the policy's LoRA adapter to every request.
    ``sync`` saves that adapter to ``folder/adapters/adapter-N`` and loads it under the new id
    N; ``reset_prefix_cache``, which a trainer calls whenever its weights change, syncs first.

    Generations carry ``prompt_ids``, ``token_ids`` and ``token_logprobs``: the log-probability
    of each sampled token at the sampling temperature (the engine's ``logprobs_mode`` is
    ``processed_logprobs``; with ``top_p < 1`` vLLM's would be those of the truncated
    distribution, while ``hf`` records the untruncated ones). On a GPU both engines run bf16, so
    these rollout-time log-probs differ from the trainer's by the engines' numerical mismatch.

    Args:
        policy: The trainer's PEFT model (its active adapter is what ``sync`` saves).
        tokenizer: The policy's tokenizer (written beside the base weights).
        folder: Where the base weights and the adapters go (inside the run folder).
        model: What the engine serves; ``None`` writes the policy's base weights.
        model_id: The backend's name in traces.
        lora_rank: The policy's LoRA rank (the engine reserves the next rank vLLM accepts).
        gpu_memory_utilization: vLLM's share of the GPU; the transformers policy, its
            optimiser and activations live in the rest.
        api, engine, **engine_args: As for ``VLLMBackend``.
    """

    def __init__(
        self,
        policy: Any,
        tokenizer: Any,
        folder: Path,
        *,
        model: str | None = None,
        model_id: str | None = None,
        lora_rank: int = 16,
        seed: int = 0,
        gpu_memory_utilization: float = 0.3,
        api: VLLMApi | None = None,
        engine: Any = None,
        **engine_args: Any,
    ):
        rank = next((r for r in LORA_RANKS if r >= lora_rank), None)
        if rank is None:
            raise ConfigError(f"vLLM serves LoRA ranks up to {LORA_RANKS[-1]}, not {lora_rank}")
        self.policy = policy
        self.folder = Path(folder)
        shutil.rmtree(self.folder / "adapters", ignore_errors=True)  # an earlier process's
        if model is None:
            model = str(self.folder / "base")
            write_base(policy, tokenizer, model)
        super().__init__(
            model,
            seed=seed,
            max_lora_rank=rank,
            enable_lora=True,
            gpu_memory_utilization=gpu_memory_utilization,
            engine=engine,
            api=api,
            logprobs_mode="processed_logprobs",
            **engine_args,
        )
        self.model_id = model_id or self.model_id
        self.return_ids = True
        self._chains = Chains()
        self.sync()

    def sync(self) -> None:
        """Save the policy's current adapter to a fresh folder and use it from the next request
        on (the engine loads it under a new id); keep only the previous adapter's folder."""
        path = self.folder / "adapters" / f"adapter-{self._lora_id + 1}"
        self.policy.save_pretrained(str(path))
        self.load_adapter(str(path))
        shutil.rmtree(self.folder / "adapters" / f"adapter-{self._lora_id - 2}", ignore_errors=True)

    def reset_prefix_cache(self) -> None:
        """The trainer's weights changed: ``sync``, then forget cached prompts and chats."""
        self.sync()
        super().reset_prefix_cache()


def write_base(policy: Any, tokenizer: Any, path: str | Path) -> None:
    """Write a PEFT ``policy``'s frozen base weights (its LoRA layers left out, so any adapter
    merged into the base stays merged) and ``tokenizer`` as a transformers model folder.

    Naive equivalent: load the base model, merge the SFT adapter, ``save_pretrained``; the tests
    check both give the same logits.
    """
    base = policy.get_base_model()
    state = {
        name.replace(".base_layer.", "."): tensor
        for name, tensor in base.state_dict().items()
        if ".lora_" not in name
    }
    base.save_pretrained(str(path), state_dict=state)
    tokenizer.save_pretrained(str(path))
