"""SEPO ablations: the same run with one setting varied (SPEC §6; seed 000 §3.4, App. F).

Each arm is an ordinary SEPO run in its own folder ``out/<setting>-<value>`` — same starting
policy, same seed, same episode seeds — so arms resume independently and their checkpoint
evaluations line up step by step. The comparison is written next to them: ``ablation.csv`` (every
checkpoint evaluation of every arm), ``ablation.md`` (each arm's last checkpoint) and
``ablation.png`` (Safety J and Exploit per step, one line per arm).

The arms of SEPO's own claim — ``safety`` (λ = 1), ``drop`` (λ = 0 as ``--safety 0``: the
exploit and collusive pools' episodes carry reward 0) and ``payoff`` (λ = 0, every pool rewarded
by the payoff: the control that differs from ``safety`` in the safety term only) — are the axis
``arm``; an ablation of ``safety``, ``control`` or ``arm`` names each row's arm, read from its
run's own fingerprint, with the training reward it gave the exploit and collusive pools.

A penalty ablation's table says, per arm, whether the mode's safety terms depend on the
rollout's own actions (``penalty follows own actions``): ``per_rollout``'s exploit and collusion
terms come from auxiliary episodes independent of them, so they carry zero expected gradient
(only its externality does), and ``shared``'s cancel in the baseline.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.runs import read_fingerprint
from stratagem.training.checkpoints import newest_state
from stratagem.training.sepo.args import ARM_MEANING, ARMS, arm_of, arm_settings
from stratagem.training.sepo.rewards import PENALTY_FOLLOWS_ACTIONS
from stratagem.training.sepo.trainer import SEPOArgs, train_sepo

AXES: dict[str, tuple[str, ...]] = {
    "penalty": ("shared", "per_rollout", "own_episodes"),
    "normalisation": ("round", "episode"),
    "credit": ("return", "immediate"),
    "scale": ("step", "group"),
    "safety": (),  # any number ≥ 0: ``--safety 1,0`` is a SEPO run beside its control
    "control": ("none", "payoff"),  # with --safety 0: the drop and payoff controls
    "arm": ARMS,  # λ = 1 beside both controls
}
ARM_AXES = frozenset({"safety", "control", "arm"})  # whose rows name their arm
NUMERIC_AXES = frozenset({"safety"})
METRICS = ("safety_j", "pay", "exploit", "collusion", "robust", "nra", "fallback_rate")


def arms(base: SEPOArgs, axis: str, values: list[str]) -> list[SEPOArgs]:
    """One SEPO run per value of ``axis``, each in its own sub-folder of ``base.out``."""
    if axis not in AXES:
        raise UnknownNameError("ablation setting", axis, tuple(AXES))
    for value in values:
        if axis in NUMERIC_AXES:
            _number(axis, value)
        elif value not in AXES[axis]:
            raise UnknownNameError(axis, value, AXES[axis])
    if len({_number(axis, v) if axis in NUMERIC_AXES else v for v in values}) < 2:
        raise ConfigError(f"an ablation of {axis} needs at least two different values")
    if not base.eval_episodes:
        raise ConfigError("an ablation compares checkpoint evaluations: set eval_episodes > 0")
    arms = []
    for value in values:
        setting = _number(axis, value) if axis in NUMERIC_AXES else value
        changes: dict[str, Any] = {"out": base.out / f"{axis}-{value}"}
        changes.update(arm_settings(value) if axis == "arm" else {axis: setting})
        arm = replace(base, **changes)
        if hasattr(arm, "check"):
            arm.check()
        arms.append(arm)
    return arms


def _number(axis: str, value: str) -> float:
    """``value`` of a numeric axis as a float; a ``ConfigError`` naming the flag if it is not
    a finite number."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise ConfigError(f"--{axis} takes numbers in an ablation, not {value!r}")
    return number


def run_ablation(base: SEPOArgs, axis: str, values: list[str], log=print) -> pd.DataFrame:
    """Train (or resume) every arm, then write and return the comparison of all of them."""
    runs = arms(base, axis, values)
    for value, args in zip(values, runs, strict=True):
        log(f"— arm {axis}={value} → {args.out}")
        train_sepo(args, log=log)
    table = ablation_table(axis, values, [args.out for args in runs])
    write_ablation(base.out, axis, table)
    return table


def ablation_table(axis: str, values: list[str], folders: list[Path]) -> pd.DataFrame:
    """Every checkpoint evaluation of every arm (long format), read from its newest checkpoint.

    An ablation of ``safety``, ``control`` or ``arm`` adds each run's ``arm`` (from its own
    ``run.json``); under ``arm`` a folder whose run is another arm than its label is refused."""
    rows = []
    for value, folder in zip(values, folders, strict=True):
        state = newest_state(folder)
        if state is None:
            raise ConfigError(f"{folder} holds no complete checkpoint to compare")
        arm = _arm(folder) if axis in ARM_AXES else None
        if axis == "arm" and arm != value:
            raise ConfigError(f"{folder} is a run of the {arm} arm, not of {value}")
        seconds = [entry["seconds"] for entry in state.log]
        kl = {entry["step"]: entry.get("kl") for entry in state.log}
        for ev in state.evals:
            row = {axis: value, "step": ev["step"]}
            if arm is not None and axis != "arm":
                row["arm"] = arm
            for metric in METRICS:
                if metric in ev:
                    row[metric] = ev[metric]["value"]
                    row[f"{metric}_se"] = ev[metric]["stderr"]
            if "exact_exploitability" in ev:
                row["exact_exploitability"] = ev["exact_exploitability"]
            row["kl"] = kl.get(ev["step"])
            row["median_step_s"] = statistics.median(seconds) if seconds else None
            if axis == "penalty":
                row["penalty_follows_actions"] = PENALTY_FOLLOWS_ACTIONS[value]
            rows.append(row)
    return pd.DataFrame(rows)


def _arm(folder: Path) -> str:
    """The arm (``SEPOArgs.arm``) of the run in ``folder``, from its fingerprint (which leaves
    out the defaults λ = 1 and control none)."""
    fingerprint = read_fingerprint(folder)
    return arm_of(fingerprint.get("safety", 1.0), fingerprint.get("control", "none"))


def write_ablation(out: Path, axis: str, table: pd.DataFrame) -> None:
    """Writes ``table`` into ``out`` as ``ablation.csv``, ``ablation.md`` and ``ablation.png``."""
    table.to_csv(out / "ablation.csv", index=False)
    (out / "ablation.md").write_text(last_checkpoint_markdown(axis, table))
    _plot(out / "ablation.png", axis, table)


def last_checkpoint_markdown(axis: str, table: pd.DataFrame) -> str:
    """Each arm at its last evaluated checkpoint, values ± one standard error (a penalty
    ablation adds whether each mode's penalty follows the rollout's own actions)."""
    last = table.sort_values("step").groupby(axis, sort=False).tail(1)
    shown = [m for m in ("safety_j", "pay", "exploit", "collusion", "nra") if m in table]
    extra = ["exact_exploitability"] if "exact_exploitability" in table else []
    follows = "penalty_follows_actions" in table
    named = axis == "arm" or "arm" in table  # the arms of SEPO's claim, each labelled
    head = [axis, *(["arm"] if axis != "arm" and named else []), "step", *shown, *extra]
    head += ["median step (s)", *(["training reward"] if named else [])]
    head += ["penalty follows own actions"] if follows else []
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for _, row in last.iterrows():
        arm = str(row["arm"] if "arm" in row else row[axis]) if named else ""
        cells = [str(row[axis]), *([arm] if axis != "arm" and named else [])]
        cells.append(str(int(row["step"])))
        cells += [f"{row[m]:.3f} ± {row[f'{m}_se']:.3f}" for m in shown]
        cells += [f"{row[m]:.4f}" for m in extra]
        cells.append("—" if pd.isna(row["median_step_s"]) else f"{row['median_step_s']:.0f}")
        cells += [ARM_MEANING.get(arm, f"λ × {arm.removeprefix('safety-')}")] if named else []
        cells += [str(row["penalty_follows_actions"])] if follows else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PANELS = (
    ("safety_j", "Safety J (higher is safer)"),
    ("pay", "Pay vs the training pool"),
    ("exploit", "Exploit (lower is safer)"),
    ("exact_exploitability", "Exact exploitability (lower is safer)"),
)


def _plot(path: Path, axis: str, table: pd.DataFrame) -> None:
    """One panel per metric the table holds (``PANELS``), one line per arm, ± one stderr."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(m, title) for m, title in PANELS if m in table]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), sharex=True)
    for value, arm in table.groupby(axis, sort=False):
        label = f"{axis}={value}"
        if "arm" in arm and axis != "arm":
            label += f" ({arm['arm'].iloc[0]})"
        for ax, (metric, _) in zip(axes, panels, strict=True):
            error = arm[f"{metric}_se"] if f"{metric}_se" in arm else None
            ax.errorbar(
                arm["step"], arm[metric], yerr=error, marker="o", capsize=3,
                label=label,
            )  # fmt: skip
    for ax, (_, title) in zip(axes, panels, strict=True):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
