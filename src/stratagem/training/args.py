"""Option groups the trainers' settings are composed of (cleanrl's ``Args``: one docstring string
right under each field, which the CLI reads as the option's help).

A trainer's settings class inherits the groups it uses and adds its own fields; a field whose
default differs for one trainer is declared again in that trainer's class, with its docstring.
``field_docs`` reads the docstrings of a class and of every group it inherits.

- ``ModelArgs``: the model and the LoRA trained on it (every trainer);
- ``PolicyArgs``: plus a starting adapter merged under that LoRA (the RL trainers);
- ``RunArgs``: the run folder, the seed, the checkpoint disk policy;
- ``SamplingArgs``: how the policy samples while it plays;
- ``UpdateArgs``: the PPO/GRPO update step (``update.update``);
- ``GRPOArgs``: all of the above plus the step loop of ``grpo.train_grpo``;
- ``TRLArgs``: the SFT jobs TRL runs (``trl_config.sft_config``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from stratagem.backends.embedded import EMBEDDED
from stratagem.errors import ConfigError
from stratagem.settings import (  # noqa: F401 (field_docs: the trainers' docs)
    NonNegativeFloat,
    OutFolder,
    PositiveFloat,
    field_docs,
    normal_path,
    normal_paths,
    opt,
)

TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj"]  # LoRA: the attention projections


@dataclass
class ModelArgs:
    """The model and the LoRA adapter trained on it (attention projections)."""

    model: str = EMBEDDED
    """``embedded`` (SmolLM2-135M-Instruct), a Hugging Face id or a local folder."""
    lora_rank: int = 16
    """Rank of the trained LoRA (attention projections)."""
    lora_alpha: int = 32
    """LoRA α."""
    lora_dropout: float = opt(0.05, "--dropout")
    """LoRA dropout (active while training, not while the policy plays)."""


@dataclass
class PolicyArgs(ModelArgs):
    """A model, a starting adapter merged into it, and a fresh LoRA trained on top."""

    adapter: str | None = None
    """Start from this LoRA adapter (an SFT run; several, comma-separated, stack): it is merged
    into the weights, which are the starting policy (and the KL reference of the GRPO trainers),
    and a fresh LoRA is trained on top."""


@dataclass
class RunArgs:
    """Where a run writes, what seeds it, how many checkpoints it keeps."""

    out: OutFolder = Path("runs")
    """The run folder."""
    seed: int = 42
    """Seeds every episode, the sampling, the LoRA initialisation and the evaluation."""
    save_total_limit: int | None = None
    """Keep at most this many checkpoints (the newest ones, plus always the best); unset: all."""


@dataclass
class SamplingArgs:
    """How the policy samples its answers while it plays."""

    temperature: float = 1.0
    """Sampling temperature of the games the policy plays (GRPO: log-probs and KL are taken at
    it too)."""
    max_new_tokens: int = 256
    """Generated tokens per answer at most."""


@dataclass
class UpdateArgs:
    """The PPO/GRPO update step: clipped surrogate plus one-sided KL, ``epochs`` optimiser steps
    per batch of rollouts."""

    learning_rate: PositiveFloat | None = None
    """AdamW learning rate (unset: the trainer's default)."""
    kl: NonNegativeFloat | None = None
    """β of the one-sided KL against the starting policy (unset: the trainer's default)."""
    clip: PositiveFloat = 0.2
    """PPO clip ε."""
    grad_clip: PositiveFloat = 1.0
    """Max gradient norm."""
    epochs: int = 1
    """Optimiser steps per batch of rollouts (the PPO ratio moves from the second on)."""
    chunk: int = 32
    """Positions per chunk of the log-prob computation."""
    packing: bool = True
    """One sequence per episode (every token read once); off: one per decision (the naive form,
    for comparison)."""
    ref_refresh_every: int = 0
    """Refresh the KL reference to the current policy every k steps (0: never, the reference
    stays the starting policy; the SEPO paper refreshes every 5)."""
    ref_refresh_kl: NonNegativeFloat | None = None
    """Also refresh it after a step whose last epoch's KL (the loss's weighted one-sided KL)
    exceeds this (unset: never; the SEPO paper: 0.5)."""
    gradient_checkpointing: bool = False
    """Recompute the decoder's activations in the backward pass: less memory, more time."""
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    """How the learning rate moves over the steps: constant, or decaying from the learning rate
    towards 0 at --lr-decay-steps, linearly or by half a cosine."""
    lr_decay_steps: Annotated[int, Field(ge=1)] | None = None
    """Steps over which the schedule decays (unset: --steps of this invocation, so a run resumed
    with more steps follows the longer schedule from where it is; give it to make a run resumed
    in parts equal an uninterrupted one)."""


# options added after runs were made: left out of a run's fingerprint at these defaults, so the
# runs made before them resume
LATER_OPTIONS: dict[str, Any] = {
    "ref_refresh_every": 0,
    "ref_refresh_kl": None,
    "gradient_checkpointing": False,
    "lr_schedule": "constant",
    "lr_decay_steps": None,
    "exploit_best_response": False,
    "safety": 1.0,
    "rollout_engine": "hf",
}


@dataclass
class GRPOArgs(UpdateArgs, SamplingArgs, RunArgs, PolicyArgs):
    """The settings ``grpo.train_grpo`` reads: policy, run, sampling, update, and its loop."""

    steps: int = 100
    """GRPO steps (a resumed run may be given more)."""
    rollouts: int = 8
    """n rollouts per group; a group shares its episode seed."""
    checkpoint_every: int = 10
    """Checkpoint (and evaluate) every k steps."""
    rollout_engine: Literal["hf", "vllm", "llamacpp"] = "hf"
    """What samples the rollouts: hf (the policy itself, in transformers), vllm (a vLLM engine
    on a GPU) or llamacpp (llama.cpp on the CPU); vllm and llamacpp serve the base weights, SFT
    adapter merged, written once under out/rollout, plus the trained LoRA, synced before each
    step. Transformers computes the gradients either way."""
    threads: int = 0
    """CPU threads of torch and of the llama.cpp engine (0: torch's default, one per core).
    Results do not depend on it; speed does: on a CPU shared with other jobs, one thread was
    several times faster than two (docs/benchmarks.md)."""

    def fingerprint(self) -> dict[str, Any]:
        """Returns the arguments that identify a run, as JSON values: ``steps``,
        ``save_total_limit`` and ``threads`` are left out, so a run can be resumed with more
        steps, another disk policy or thread count; paths are resolved (``normal_path``), so a
        folder named another way (relative, absolute, a link) is the same run."""
        d = asdict(self)
        d.pop("steps")  # a resumed run may be extended
        d.pop("save_total_limit")  # disk policy, not training
        d.pop("threads")  # speed only: results agree to float rounding at any thread count
        d.update(resolved_paths(self))
        for key, default in LATER_OPTIONS.items():
            if d.get(key) == default:
                d.pop(key)
        return d


@dataclass
class TRLArgs:
    """One SFT job run by TRL's ``SFTTrainer`` (cosine schedule with warm-up)."""

    learning_rate: PositiveFloat = 2e-5
    """Peak learning rate (cosine schedule)."""
    epochs: PositiveFloat = 3.0
    """Passes over the training chats."""
    warmup_ratio: Annotated[float, Field(ge=0, lt=1)] = 0.05
    """Share of the steps spent warming the cosine schedule up."""
    batch_size: int = 8
    """Chats per device step."""
    grad_accum: int = 1
    """Steps of gradient accumulation per optimiser step."""
    max_length: int = 2048
    """Tokens per chat at most: `train sft` cuts a longer chat at its end; `train selfplay` drops
    its earliest exchanges instead, so the final answer (the move that earned the reward) stays."""


def resolved_paths(args: object) -> dict[str, Any]:
    """The path settings of ``args`` resolved for a fingerprint: ``out``, each ``adapter`` and
    every other ``Path`` field (or list of them)."""
    out: dict[str, Any] = {}
    for name, value in vars(args).items():
        if isinstance(value, Path):
            out[name] = normal_path(value)
        elif isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
            out[name] = [normal_path(v) for v in value]
    if isinstance(getattr(args, "adapter", None), str):
        out["adapter"] = normal_paths(args.adapter)  # type: ignore[attr-defined]
    return out


def require_at_least(args: object, minimums: Iterable[tuple[str, float]], why: str = "") -> None:
    """Refuse a setting below its least value.

    Args:
        args: the settings.
        minimums: (field name, least value) pairs, checked in order.
        why: appended to the message of ``rollouts`` (e.g. " (GRPO compares rollouts)").

    Raises:
        ConfigError: ``--field-name must be at least N, got V`` for the first one below.
    """
    for name, least in minimums:
        value = getattr(args, name)
        if value < least:
            flag = "--" + name.replace("_", "-")
            reason = why if name == "rollouts" else ""
            raise ConfigError(f"{flag} must be at least {least}{reason}, got {value}")


def check_lora_dropout(args: ModelArgs) -> None:
    """Refuse a LoRA dropout outside [0, 1).

    Raises:
        ConfigError: naming ``--lora-dropout``.
    """
    if not 0 <= args.lora_dropout < 1:
        raise ConfigError(f"--lora-dropout must be in [0, 1), got {args.lora_dropout}")


def check_adapters(args: PolicyArgs) -> None:
    """Refuse starting adapters that are not folders, or folders without an adapter in them.

    Raises:
        ConfigError: naming ``--adapter`` and the folder.
    """
    for folder in (args.adapter or "").split(","):
        if folder and not Path(folder).is_dir():
            raise ConfigError(f"--adapter {folder}: no such adapter folder")
        if folder and not (Path(folder) / "adapter_config.json").exists():
            raise ConfigError(f"--adapter {folder}: no adapter_config.json in that folder")


def check_schedule(args: GRPOArgs) -> None:
    """Refuse a learning-rate horizon that nothing reads or that is not a step count.

    Raises:
        ConfigError: naming ``--lr-decay-steps``.
    """
    if args.lr_decay_steps is None:
        return
    if args.lr_schedule == "constant":
        raise ConfigError("--lr-decay-steps needs a decaying --lr-schedule (linear or cosine)")
    if args.lr_decay_steps < 1:
        raise ConfigError(f"--lr-decay-steps must be at least 1, got {args.lr_decay_steps}")


def check_policy(args: PolicyArgs) -> None:
    """``check_lora_dropout`` then ``check_adapters``.

    Raises:
        ConfigError: naming the option.
    """
    check_lora_dropout(args)
    check_adapters(args)
