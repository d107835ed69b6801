"""Loading a policy for training: the base model (any starting adapters merged into it), a fresh
trainable LoRA on its language model's attention projections, and the tokenizer.

The LoRA wraps the attention projections of the language model only (seed 000 Table 17): a
multimodal checkpoint (Gemma 3) loads with its vision tower, whose attention projections carry
the same names, so targets are the full names of the modules under the decoder
(``language_model_targets``), never bare names.

Weights are bf16 on a GPU (PEFT keeps the LoRA weights in fp32) and fp32 on a CPU, where runs
are bit-reproducible. The LoRA's initial weights follow the run's seed.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from stratagem.backends.embedded import EMBEDDED, embedded_dir
from stratagem.seeding import derive
from stratagem.training.args import TARGET_MODULES


def language_model_targets(model: torch.nn.Module, names: list[str] | None = None) -> list[str]:
    """The full names of the modules called ``names`` (default ``TARGET_MODULES``) inside
    ``model``'s language model (its ``get_decoder()``), e.g.
    ``model.language_model.layers.0.self_attn.q_proj``; a vision tower's are left out.

    Raises:
        ValueError: the model has no such module under its decoder.
    """
    wanted = set(names if names is not None else TARGET_MODULES)
    decoder = model.get_decoder()  # type: ignore[operator]
    prefix = next(n for n, m in model.named_modules() if m is decoder)
    found = [
        name
        for name, module in decoder.named_modules(prefix=prefix)
        if name.rsplit(".", 1)[-1] in wanted and isinstance(module, torch.nn.Linear)
    ]
    if not found:
        raise ValueError(f"no {sorted(wanted)} under the language model {prefix or '(root)'}")
    return found


class PolicySettings(Protocol):
    """What ``load_policy`` reads (``args.PolicyArgs`` and ``args.RunArgs`` together)."""

    @property
    def model(self) -> str:
        """The model: ``embedded``, a Hugging Face id or a folder."""
        ...

    @property
    def adapter(self) -> str | None:
        """Starting adapters to merge, comma-separated."""
        ...

    @property
    def lora_rank(self) -> int:
        """The LoRA's rank."""
        ...

    @property
    def lora_alpha(self) -> int:
        """The LoRA's α."""
        ...

    @property
    def lora_dropout(self) -> float:
        """The LoRA's dropout."""
        ...

    @property
    def seed(self) -> int:
        """The run's seed: the LoRA's initial weights derive from it."""
        ...


def model_path(model: str) -> str:
    """The folder or Hugging Face id to load: ``embedded`` is the bundled SmolLM2."""
    return str(embedded_dir()) if model == EMBEDDED else model


def load_base(model: str) -> tuple[Any, Any]:
    """The model ``model`` (bf16 on a GPU, fp32 on a CPU, on that device) and its tokenizer,
    whose pad token is its end-of-sequence token when it names none."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = model_path(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    gpu = torch.cuda.is_available()
    base: torch.nn.Module = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16 if gpu else torch.float32
    )
    return base.to("cuda" if gpu else "cpu"), tokenizer


def enable_gradient_checkpointing(policy: Any) -> None:
    """Recompute the decoder's activations in the backward pass (non-reentrant; transformers 5
    names it activation checkpointing and also hooks the embeddings so that their outputs
    require grad, which ``disable_gradient_checkpointing`` removes again)."""
    kwargs = {"use_reentrant": False}
    if hasattr(policy, "activation_checkpointing_enable"):
        policy.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def disable_gradient_checkpointing(policy: Any) -> None:
    """Undo ``enable_gradient_checkpointing``: the decoder keeps its activations again and the
    embeddings' input-gradient hook is removed."""
    if hasattr(policy, "activation_checkpointing_disable"):
        policy.activation_checkpointing_disable()
    else:
        policy.gradient_checkpointing_disable()
    if hasattr(policy, "disable_input_require_grads"):
        policy.disable_input_require_grads()


def merge_adapters(model: Any, adapter: str | None) -> Any:
    """``model`` with each adapter folder of ``adapter`` (comma-separated, in order) merged into
    its weights; ``model`` itself when there is none."""
    from peft import PeftModel

    for folder in (adapter or "").split(","):
        if folder:
            model = PeftModel.from_pretrained(model, folder).merge_and_unload()
    return model


def load_policy(args: PolicySettings) -> tuple[Any, Any]:
    """The base model (with the starting adapters merged in, if any), a fresh trainable LoRA on
    top, and the tokenizer. The merged weights are what disabling the LoRA gives: the KL
    reference."""
    from peft import LoraConfig, get_peft_model

    base, tokenizer = load_base(args.model)
    # the SFT policy is the start and the reference, as in the paper
    base = merge_adapters(base, args.adapter)
    lora = LoraConfig(
        r=args.lora_rank,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=language_model_targets(base),
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):  # the adapter's initial weights follow the seed
        torch.manual_seed(derive(args.seed, "lora-init") % 2**63)
        return get_peft_model(base, lora), tokenizer
