"""The one GRPO loop (SEPO, bargaining GRPO): rollouts -> rewards -> advantages -> update ->
checkpoint / evaluation, resumable from the newest complete checkpoint.

A trainer plugs in what differs — how a step's episodes are played and turned into training
samples (rewards and advantages included), how a checkpoint is evaluated, what is drawn after a
save — as a ``GRPOTask``; the loop owns the policy, the optimiser, the update and the
checkpoints. Each step:

1. ``task.rollouts(step)``: the step's samples (``packing.Turn``: tokens, rollout-time
   log-probabilities, advantage, loss weight) and the numbers to log;
2. the samples become sequences (``packing.pack``, or one per decision without packing) and
   ``update.update`` takes ``epochs`` optimiser steps on them;
3. the KL reference is refreshed to the current policy when ``update.Reference.due`` says so
   (``--ref-refresh-every``, ``--ref-refresh-kl``; never by default);
4. every ``checkpoint_every`` steps and after the last: ``task.evaluate`` (when the run
   evaluates), an atomic checkpoint, ``task.report``. Step 0 (the starting policy) is
   evaluated too, so every checkpoint is compared on the same footing.

A resumed run restores the adapter, the optimiser, the torch RNG and a refreshed reference, so
its next step is the step an uninterrupted run would take. ``--gradient-checkpointing``
recomputes the decoder's activations in the backward pass; ``--lr-schedule`` decays the learning
rate step by step (``scheduled_learning_rate``). ``--rollout-engine`` picks what
samples the rollouts (``engines.rollout_backend``); ``--threads`` sets torch's CPU threads (and
the llama.cpp engine's) for the rest of the process.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from stratagem.seeding import derive
from stratagem.training.args import GRPOArgs
from stratagem.training.checkpoints import Checkpoints, TrainerState
from stratagem.training.memory import release_memory
from stratagem.training.packing import Turn, sequences_of
from stratagem.training.policy import enable_gradient_checkpointing, load_policy
from stratagem.training.update import Reference, update

Log = Callable[[str], None]


@dataclass
class StepRollouts:
    """One step's training samples and the numbers logged before the update's."""

    samples: list[Turn]
    summary: dict[str, float]  # e.g. the mean reward; first in the step's log entry


class GRPOTask(Protocol):
    """What a trainer plugs into ``train_grpo``."""

    metric: str
    """The evaluation row's key that picks the best checkpoint (higher is better)."""
    evaluates: bool
    """Whether checkpoints are evaluated."""

    def start(self, policy: Any, tokenizer: Any) -> None:
        """Once per run, after the policy is loaded (and resumed): build the rollout agent."""
        ...

    def rollouts(self, step: int) -> StepRollouts:
        """Plays step ``step``'s episodes with the current policy and returns its samples."""
        ...

    def evaluate(self, policy: Any, tokenizer: Any, step: int) -> dict[str, Any]:
        """The evaluation row of the current policy as checkpoint ``step``
        (``{"step": step, metric: {"value", "stderr", "n"}, ...}``)."""
        ...

    def headline(self, row: dict[str, Any]) -> dict[str, Any]:
        """The numbers of an evaluation row to log."""
        ...

    def report(self, state: TrainerState) -> None:
        """Redraw what the run folder shows after a checkpoint (curves, tables)."""
        ...


NO_SIGNAL = (
    "step {step}: no trained token has a non-zero advantage: every group's rollouts earned the "
    "same reward, so only the KL term moved the policy. A policy this certain does not explore "
    "at this temperature: start from a less certain one or sample hotter (--temperature)"
)


def signal_tokens(sequences: list) -> int:
    """The trained tokens whose advantage is not zero: the ones the policy gradient reads. 0
    when every group's rollouts earned the same reward (a near-deterministic policy)."""
    return sum(
        1 for s in sequences for a, w in zip(s.advantages, s.weights, strict=True) if a and w
    )


def step_entry(
    step: int,
    rolled_out: StepRollouts,
    sequences: list,
    seconds: tuple[float, float],
    epochs: list[dict[str, float]],
) -> dict[str, Any]:
    """A step's log record: the rollouts' summary and sizes, the seconds of its rollouts and
    of the whole step, then the first epoch's update statistics (and the last epoch's when
    there are several)."""
    entry: dict[str, Any] = {
        "step": step,
        **rolled_out.summary,
        "samples": len(rolled_out.samples),
        "sequences": len(sequences),
        "sequence_tokens": sum(len(q.ids) for q in sequences),
        "rollout_seconds": seconds[0],
        "signal_tokens": signal_tokens(sequences),
        "seconds": seconds[1],
        **epochs[0],
    }
    if len(epochs) > 1:
        entry["last_epoch"] = epochs[-1]
    return entry


def learning_rate(args: GRPOArgs) -> float:
    """The optimiser's learning rate; a trainer resolves its default before training.

    Raises:
        ValueError: ``learning_rate`` is still None.
    """
    if args.learning_rate is None:
        raise ValueError("learning_rate is unset: resolve the trainer's default first")
    return args.learning_rate


def scheduled_learning_rate(args: GRPOArgs, step: int) -> float:
    """The learning rate of the update of step ``step`` (0-based): ``--learning-rate`` under
    ``constant``; else decayed by the fraction ``step / horizon`` of ``--lr-decay-steps`` (or
    ``--steps``) passed, linearly or by half a cosine, reaching 0 at the horizon and staying
    there. A function of the step alone, so a resumed run takes the rate it would have taken."""
    rate = learning_rate(args)
    if args.lr_schedule == "constant":
        return rate
    horizon = args.steps if args.lr_decay_steps is None else args.lr_decay_steps
    passed = min(step / horizon, 1.0)
    if args.lr_schedule == "linear":
        return rate * (1.0 - passed)
    return rate * 0.5 * (1.0 + math.cos(math.pi * passed))


def apply_schedule(optimizer: Any, args: GRPOArgs, step: int) -> float:
    """Sets every parameter group's learning rate to step ``step``'s; returns it."""
    rate = scheduled_learning_rate(args, step)
    for group in optimizer.param_groups:
        group["lr"] = rate
    return rate


def train_grpo(args: GRPOArgs, task: GRPOTask, *, torch_seed: str, log: Log = print) -> Path:
    """Run (or resume) GRPO on ``task``; returns the run folder.

    Args:
        args: checked settings, per-trainer defaults resolved.
        task: the trainer's rollouts, evaluation and reports.
        torch_seed: the key the torch RNG of a fresh run derives from (LoRA dropout draws).
        log: receives one line per step, evaluation and resume.
    """
    policy, tokenizer, params, optimizer = _start_policy(args)
    runtime = {"steps": args.steps, "save_total_limit": args.save_total_limit}
    with Checkpoints(
        args.out, args.fingerprint(), keep=args.save_total_limit, runtime=runtime
    ) as ckpt:
        state = _start_state(ckpt, policy, optimizer, args, torch_seed)
        reference = Reference(ckpt.extra.get("reference"))
        if state.step:
            log(f"resuming {args.out} from checkpoint-{state.step}")
        policy.eval()
        task.start(policy, tokenizer)

        def checkpoint() -> None:
            """Evaluate the policy (if asked), save the checkpoint, redraw the reports."""
            if task.evaluates:
                row = task.evaluate(policy, tokenizer, state.step)
                state.record_eval(row, task.metric)
                log(json.dumps({"step": state.step, **task.headline(row)}))
            extra = {"reference": reference.snapshot} if reference.snapshot is not None else {}
            ckpt.save(state, policy, optimizer, extra=extra)
            task.report(state)

        if state.step == 0 and task.evaluates and not state.evals:
            checkpoint()  # the starting policy, on the footing of every later checkpoint
        for step in range(state.step, args.steps):
            entry = _train_step(step, task, policy, optimizer, params, args, reference)
            state.log.append(entry)
            log(json.dumps(entry))
            if not entry["signal_tokens"]:
                log(NO_SIGNAL.format(step=step + 1))
            state.step = step + 1
            if state.step % args.checkpoint_every == 0 or state.step == args.steps:
                checkpoint()
        ckpt.run.finish("complete", steps=state.step)
    return args.out


def _start_policy(
    args: GRPOArgs,
) -> tuple[Any, Any, list[torch.nn.Parameter], torch.optim.Optimizer]:
    """Loads the policy (on ``args.threads`` CPU threads, gradient checkpointing as asked)
    and returns it with its tokenizer, its trainable parameters and their AdamW optimiser."""
    if args.threads:
        torch.set_num_threads(args.threads)
    policy, tokenizer = load_policy(args)
    if args.gradient_checkpointing:
        enable_gradient_checkpointing(policy)
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=learning_rate(args))
    return policy, tokenizer, params, optimizer


def _start_state(
    ckpt: Checkpoints,
    policy: Any,
    optimizer: torch.optim.Optimizer,
    args: GRPOArgs,
    torch_seed: str,
) -> TrainerState:
    """The state of the run's newest complete checkpoint, restored into ``policy`` and
    ``optimizer`` (the torch RNG too); else a fresh state, the torch RNG seeded from
    ``torch_seed``."""
    state = ckpt.resume(policy, optimizer)  # restores the torch RNG too
    if state is None:
        state = TrainerState(below=args.adapter)
        torch.manual_seed(derive(args.seed, torch_seed) % 2**63)  # LoRA dropout draws
    return state


def _train_step(
    step: int,
    task: GRPOTask,
    policy: Any,
    optimizer: torch.optim.Optimizer,
    params: list[torch.nn.Parameter],
    args: GRPOArgs,
    reference: Reference,
) -> dict[str, Any]:
    """Step ``step`` (0-based): its rollouts, ``epochs`` updates on them, and a refresh of the
    ``reference`` when due; returns the step's log entry."""
    start = time.perf_counter()
    rolled_out = task.rollouts(step)
    release_memory()  # what the rollouts freed, before the update allocates
    sequences = sequences_of(rolled_out.samples, args.packing)
    rolled = time.perf_counter()
    rate = apply_schedule(optimizer, args, step)
    epochs = update(policy, optimizer, params, sequences, args, reference=reference)
    seconds = (rolled - start, time.perf_counter() - start)
    entry = step_entry(step + 1, rolled_out, sequences, seconds, epochs)
    entry["lr"] = rate
    if reference.due(step + 1, epochs[-1]["kl"], args):
        reference.refresh(policy)
        entry["reference_refreshed"] = True
    return entry
