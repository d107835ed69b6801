"""``stratagem selfplay-eval``: a self-play run's checkpoints evaluated again, on more games
(``training.selfplay.evaluate``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console
from rich.table import Table

from stratagem.errors import ConfigError
from stratagem.settings import Positive, opt

console = Console()
COLUMNS = (
    "phase",
    "checkpoint",
    "score",
    "paired change [95 %]",
    "agreement",
    "joint-best",
    "joint-best, paired (gained vs lost, McNemar p)",
)


@dataclasses.dataclass(kw_only=True)
class SelfPlayEvalConfig:
    """Evaluate a self-play run's checkpoints on more games.

    More held-out games than the run played, the same for every checkpoint, with paired changes
    from the first (checked to be over the same games). For a run that chose on selection games,
    the games on its selection contexts are drawn again, and the count is printed."""

    run: Path = opt(..., argument=True)
    """A run folder written by `stratagem train selfplay`."""
    games: Positive = opt(100, "-n")
    """Games per phase and checkpoint; the first --eval-games of them are the run's own."""
    checkpoints: str = "0"
    """Checkpoints to evaluate, comma-separated (0 is the start); changes are paired with the
    first."""
    phases: str = "selfplay,fixed"
    """selfplay (the policy with itself), fixed (against the run's fixed agent), or both."""
    opponent: str | None = None
    """The fixed phase's agent, when not the run's own (e.g. one it never trained with): the
    same games against it, written as phase fixed-<NAME>."""


def selfplay_eval_command(cfg: SelfPlayEvalConfig) -> None:
    """Evaluate a self-play run's checkpoints on more games."""
    from stratagem.training.selfplay.evaluate import evaluate_checkpoints

    checkpoints = _numbers(cfg.checkpoints)
    phases = [p.strip() for p in cfg.phases.split(",") if p.strip()]
    results = evaluate_checkpoints(
        cfg.run, checkpoints, cfg.games, phases, log=console.print, opponent=cfg.opponent
    )
    table = Table(title=f"{cfg.run}: {cfg.games} games per phase and checkpoint")
    for name in COLUMNS:
        table.add_column(name, justify="left" if name == "phase" else "right")
    for r in results:
        m = r.metrics
        table.add_row(
            r.phase,
            str(r.checkpoint),
            str(m["score"]),
            r.paired_text(),
            str(m["agreement_rate"]),
            str(m["joint_best_rate"]),
            r.joint_best_text(),
        )
    console.print(table)
    redrawn = {r.phase: r.redrawn for r in results}
    console.print(
        "re-drawn off the run's selection contexts: "
        + ", ".join(f"{phase} {n} of {cfg.games} games" for phase, n in redrawn.items())
    )
    console.print(f"wrote {Path(cfg.run) / f'evaluation-{cfg.games}'}")


def _numbers(text: str) -> list[int]:
    """``"0,2,4"`` as ``[0, 2, 4]``, each once.

    Raises:
        ConfigError: an entry that is not a whole number, or one named twice.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        raise ConfigError(f"--checkpoints: whole numbers, comma-separated, not {text!r}")
    numbers = [int(p) for p in parts]
    if len(set(numbers)) != len(numbers):
        raise ConfigError(f"--checkpoints: each checkpoint once, not {text!r}")
    return numbers
