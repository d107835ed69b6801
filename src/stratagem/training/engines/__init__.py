"""The engine that samples a GRPO trainer's rollouts (``--rollout-engine``; SEPO and bargaining
GRPO): the policy itself in transformers (``hf``), a vLLM engine on a GPU (``vllm``), or
llama.cpp on the CPU (``llamacpp``). Transformers keeps the policy and computes the gradients
whichever samples; an engine other than ``hf`` serves the policy's base weights (starting
adapter merged) and is given the trained LoRA whenever the loop calls ``reset_prefix_cache``
(before each step's rollouts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stratagem.backends.embedded import EMBEDDED, embedded_dir
from stratagem.errors import ConfigError
from stratagem.training.args import GRPOArgs

if TYPE_CHECKING:
    from stratagem.backends.hf import HFBackend
    from stratagem.training.engines.llamacpp import TrainerLlamaCppBackend
    from stratagem.training.engines.vllm import TrainerVLLMBackend

    RolloutBackend = HFBackend | TrainerVLLMBackend | TrainerLlamaCppBackend


def check_rollout_engine(args: GRPOArgs) -> None:
    """Refuse, before any model loads, an engine that cannot run here.

    Raises:
        ConfigError: ``--rollout-engine E: why`` (the package or GPU missing; for llamacpp, a
            model architecture the GGUF conversion does not write).
    """
    if args.rollout_engine == "vllm":
        from stratagem.backends.vllm import vllm_unavailable

        if (reason := vllm_unavailable()) is not None:
            raise ConfigError(f"--rollout-engine vllm: {reason}")
    elif args.rollout_engine == "llamacpp":
        from stratagem.backends.llamacpp.engine import llamacpp_unavailable

        if (reason := llamacpp_unavailable()) is not None:
            raise ConfigError(f"--rollout-engine llamacpp: {reason}")
        from transformers import AutoConfig

        from stratagem.training.engines.gguf import architecture
        from stratagem.training.policy import model_path

        try:
            architecture(AutoConfig.from_pretrained(model_path(args.model)))
        except ConfigError as e:
            raise ConfigError(f"--rollout-engine llamacpp: {e}") from None


def rollout_backend(policy: Any, tokenizer: Any, args: GRPOArgs, model_id: str) -> RolloutBackend:
    """The backend of a trainer's rollouts, by ``args.rollout_engine``: ``hf`` (the policy,
    with per-seat KV reuse), ``vllm`` (``TrainerVLLMBackend``: the base with the SFT adapter
    merged written once to ``out/rollout/base``, the LoRA saved and reloaded) or ``llamacpp``
    (``TrainerLlamaCppBackend``: the same base converted once to ``out/rollout/base-f32.gguf``,
    the LoRA converted to a GGUF adapter and applied)."""
    if args.rollout_engine == "vllm":
        from stratagem.training.engines.vllm import TrainerVLLMBackend

        served = None  # the policy's base as written by the backend: the SFT adapter merged
        if not args.adapter:
            served = str(embedded_dir()) if args.model == EMBEDDED else args.model
        return TrainerVLLMBackend(
            policy,
            tokenizer,
            args.out / "rollout",
            model=served,
            model_id=model_id,
            lora_rank=args.lora_rank,
            seed=args.seed,
        )
    if args.rollout_engine == "llamacpp":
        from stratagem.training.engines.llamacpp import TrainerLlamaCppBackend

        return TrainerLlamaCppBackend(
            policy, tokenizer, args.out / "rollout", model_id=model_id, threads=args.threads or None
        )
    from stratagem.backends.hf import HFBackend

    return HFBackend.from_model(policy, tokenizer, model_id=model_id, prefix_reuse=True)
