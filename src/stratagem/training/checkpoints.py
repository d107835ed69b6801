"""Trainer checkpoints shared by the trainers (SEPO, filtered-BC self-play, bargaining GRPO).

A trainer's run folder is a ``runs.RunFolder``: one writer (a lock), the resolved settings in
``run.json``, and resuming under other settings refused (``ConfigDriftError`` naming the keys).
Inside it, ``checkpoint-N/`` folders hold the PEFT adapter (``adapter/``, loadable by ``stratagem
eval --adapter``), the optimiser and RNG states (``trainer.pt``) and the typed ``TrainerState``
(``trainer_state.json``). A checkpoint is written into ``checkpoint-N.tmp``, fsynced, marked
``COMPLETE`` and renamed, so a kill at any point leaves either the old or the new checkpoint: a
step saved again moves its old folder aside to ``checkpoint-N.old`` first (two renames; opening
the folder puts it back if the kill came between them, or drops it once the new one is there).
``best.json`` names the best one by the trainer's selection metric, which rotation never deletes;
it is written (temp file, then rename) after the checkpoint whose state it copies, and opening
the folder rewrites it from the newest checkpoint's state, so a kill between the two leaves a
``best.json`` that at worst lags one checkpoint behind until the run is reopened.

Resuming loads the newest complete checkpoint: the adapter weights, the optimiser, the torch RNG
and the state; the next step then is the step an uninterrupted run would have taken.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from stratagem.runs import RunFolder

STATE = "trainer_state.json"
BEST = "best.json"
_FOLDER = re.compile(r"checkpoint-(\d+)")


@dataclass
class Best:
    """The best checkpoint so far by the trainer's selection metric (higher is better)."""

    step: int
    score: float  # the selection metric's value (SEPO: Safety J)
    metric: str  # its name, e.g. "safety_j"
    adapter: str  # relative to the run folder: checkpoint-N/adapter
    below: str | None = None  # the adapter(s) merged under this one (``--adapter SFT,THIS``)


@dataclass
class TrainerState:
    """Everything a trainer carries across steps besides weights, optimiser and RNG.

    ``log`` holds one record of numbers per step; ``evals`` one checkpoint evaluation per entry:
    ``{"step": N, metric: {"value", "stderr", "n"}, ...}``.
    """

    step: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    best: Best | None = None
    below: str | None = None  # the starting adapter, merged into the weights

    def record_eval(self, row: dict[str, Any], metric: str) -> bool:
        """Appends a checkpoint evaluation; returns whether it is the new best by ``metric``. A
        score over no game (``"n": 0``: every game of it errored) is never the best."""
        self.evals.append(row)
        score = float(row[metric]["value"])
        if row[metric].get("n") == 0:
            return False
        if self.best is not None and score <= self.best.score:
            return False
        self.best = Best(
            row["step"], score, metric, f"checkpoint-{row['step']}/adapter", self.below
        )
        return True

    def to_json(self) -> str:
        """The state as JSON text."""
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> TrainerState:
        """Reads ``to_json``'s text back."""
        data = json.loads(text)
        best = data.pop("best", None)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known, best=Best(**best) if best else None)


class Checkpoints:
    """A trainer's run folder: lock, fingerprint, atomic checkpoints, resume and rotation.

    Use as a context manager around the training loop (it holds the folder's lock)::

        with Checkpoints(out, fingerprint, keep=3) as ckpt:
            state = ckpt.resume(policy, optimizer) or TrainerState()
            ...
            ckpt.save(state, policy, optimizer)
    """

    def __init__(
        self,
        out: Path,
        fingerprint: Mapping[str, Any],
        *,
        keep: int | None = None,
        runtime: Mapping[str, Any] | None = None,
    ):
        """Open (or create) the run folder ``out`` for ``fingerprint``; keep at most ``keep``
        checkpoints (the newest, plus always the best; None: all).

        Raises:
            ConfigDriftError: the folder was made with other settings.
            RunLockedError: another process is training in it.
        """
        self.out = Path(out)
        self.keep = keep
        self.run = RunFolder(self.out, fingerprint, runtime=runtime)
        self.extra: dict[str, Any] = {}  # what ``save(extra=...)`` stored, after ``resume``
        self._recover()

    def _recover(self) -> None:
        """Finish what a kill interrupted: a step's old folder moved aside comes back unless its
        new one is complete; ``best.json`` is rewritten from the newest checkpoint's state."""
        for old in self.out.glob("checkpoint-*.old"):
            final = old.with_suffix("")
            if (final / "COMPLETE").exists():
                shutil.rmtree(old)
            else:
                shutil.rmtree(final, ignore_errors=True)
                os.replace(old, final)
        state = newest_state(self.out)
        if state is not None and state.best is not None:
            _write_atomic(self.out / BEST, _best_json(state.best))

    def __enter__(self) -> Checkpoints:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the run folder."""
        self.run.close()

    def complete(self) -> list[Path]:
        """The finished ``checkpoint-N`` folders, oldest first."""
        return complete_checkpoints(self.out)

    def resume(self, policy: Any, optimizer: Any) -> TrainerState | None:
        """Load the newest complete checkpoint into ``policy`` (its adapter) and ``optimizer``,
        restore the torch RNG, and return its state; None when there is none (warning about
        incomplete ones)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        complete = self.complete()
        for d in sorted(set(self.out.glob("checkpoint-*")) - set(complete)):
            warnings.warn(f"ignoring incomplete checkpoint {d}", stacklevel=2)
        if not complete:
            return None
        newest = complete[-1]
        weights = load_file(newest / "adapter" / "adapter_model.safetensors")
        set_peft_model_state_dict(policy, weights)
        trainer = torch.load(newest / "trainer.pt", weights_only=True)
        optimizer.load_state_dict(trainer["optimizer"])
        self.extra = trainer.get("extra", {})
        torch.set_rng_state(trainer["torch_rng"])
        if trainer.get("cuda_rng"):
            torch.cuda.set_rng_state_all(trainer["cuda_rng"])
        return TrainerState.from_json((newest / STATE).read_text())

    def save(
        self,
        state: TrainerState,
        policy: Any,
        optimizer: Any,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> Path:
        """Write ``checkpoint-<state.step>`` atomically, update ``best.json``, rotate.

        ``extra`` (tensors, numbers) goes into ``trainer.pt`` and comes back in ``self.extra``
        on ``resume`` (GRPO: the refreshed KL reference)."""
        final = self.out / f"checkpoint-{state.step}"
        tmp = self.out / f"checkpoint-{state.step}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        # PEFT's own layout, so `stratagem eval --adapter checkpoint-N/adapter` loads it
        policy.save_pretrained(tmp / "adapter")
        torch.save(
            {
                "optimizer": optimizer.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                "extra": dict(extra or {}),
            },
            tmp / "trainer.pt",
        )
        (tmp / STATE).write_text(state.to_json())
        (tmp / "COMPLETE").write_text("ok\n")
        for f in tmp.rglob("*"):
            if f.is_file():
                with open(f, "rb") as handle:
                    os.fsync(handle.fileno())
        aside = self.out / f"checkpoint-{state.step}.old"
        shutil.rmtree(aside, ignore_errors=True)
        if final.exists():  # a step saved again: the old folder stays whole until replaced
            os.replace(final, aside)
        os.replace(tmp, final)
        _fsync_dir(self.out)
        shutil.rmtree(aside, ignore_errors=True)
        if state.best is not None:  # after the checkpoint it copies: never names a missing one
            _write_atomic(self.out / BEST, _best_json(state.best))
        self.rotate(state)
        return final

    def rotate(self, state: TrainerState) -> None:
        """Drop the oldest checkpoints beyond ``keep``; the best one always stays."""
        if not self.keep:
            return
        best = state.best.step if state.best is not None else None
        others = [d for d in self.complete() if step_of(d) != best]
        keep = max(self.keep - (best is not None), 1)
        for old in others[:-keep]:
            shutil.rmtree(old)


class NoOptimizer:
    """Stands in for the optimiser in checkpoints of a trainer that starts a fresh optimiser in
    every iteration (self-play's SFT jobs), so no optimiser state crosses an iteration boundary."""

    def state_dict(self) -> dict[str, Any]:
        """Nothing to save."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


def complete_checkpoints(out: Path) -> list[Path]:
    """The finished ``checkpoint-N`` folders of a run, oldest first."""
    found = [d for d in Path(out).glob("checkpoint-*") if _FOLDER.fullmatch(d.name)]
    return sorted((d for d in found if (d / "COMPLETE").exists()), key=step_of)


def step_of(folder: Path) -> int:
    """The step N of a ``checkpoint-N`` folder."""
    return int(folder.name.split("-")[1].split(".")[0])


def newest_state(out: Path) -> TrainerState | None:
    """The state of a run's newest complete checkpoint (None without one)."""
    done = complete_checkpoints(out)
    return TrainerState.from_json((done[-1] / STATE).read_text()) if done else None


def _best_json(best: Best) -> str:
    return json.dumps(asdict(best)) + "\n"


def _fsync_dir(folder: Path) -> None:
    """Make the renames inside ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``path`` through a temp file and a rename: readers see the old or the new text."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
