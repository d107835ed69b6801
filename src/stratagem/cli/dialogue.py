"""``stratagem dialogue``: live dialogues with one seat steered, and the elected-steered
meta-game played from them (seed 003 §4): ``--steer mlp.pt`` (an MLP saved by ``imitate``) or
``--steer cfr`` (each scenario's CFR policy); run by ``training.steering``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rich.console import Console

from stratagem.cli.options import RunGroup
from stratagem.settings import NonNegative, Positive, opt, resolved
from stratagem.solvers.dialogue.setup import DialogueSettings

console = Console()


@dataclasses.dataclass(kw_only=True)
class DialogueConfig(RunGroup, DialogueSettings):
    """Play live dialogues steered by a policy.

    Instructions come from a steering policy; the elected meta-game chooses steered or not."""

    game: str = opt(..., "-g")
    """Dialogue game: meeting, fruit, debate."""
    steer: str = opt(...)
    """The steering policy: an MLP saved by `imitate` (its mlp.pt), or cfr."""
    scenarios: Positive = 4
    """Scenarios played."""
    offset: NonNegative | None = None
    """Index of the first scenario [after the MLP's training scenarios; 0 with cfr]."""
    games: Positive = 4
    """Live dialogues per scenario in each cell of the meta-game."""
    iterations: Positive = opt(1000, "-n")
    """CFR+ iterations per tree (--steer cfr)."""


def dialogue_command(cfg: DialogueConfig) -> None:
    """Play live dialogues with instructions from a steering policy; elect steered or not."""
    from stratagem.training.steering import prepare_live, run_live

    prepared = prepare_live(cfg)  # the MLP, its embedder and the settings, before any call
    folder = cfg.run_folder(Path("runs") / f"dialogue-{cfg.game}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(resolved(cfg), indent=2) + "\n")
    run_live(cfg, prepared, folder, console)
