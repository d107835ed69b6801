"""``stratagem imitate``: learn CFR's instruction policy from text and steer held-out dialogues.

Expands the trees of ``--train`` and ``--test`` scenarios of a dialogue game together (one
batched model call per depth), solves every tree with CFR, trains the imitation MLP on the
training trees' (embedded information state, CFR policy) pairs (``training.imitation``), steers
the held-out trees with it and evaluates the 2×2 meta-game steered vs unsteered LLM (seed 003
§4): ``training.steering``. Writes the config, ``losses.csv`` and ``loss.png``, the MLP
(``mlp.pt``, which ``stratagem dialogue --steer`` loads), the meta-game (``meta_game.json``),
``summary.json`` and ``table.md``. A failed generation stops it before CFR.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

from pydantic import Field
from rich.console import Console

from stratagem.cli.options import RunGroup
from stratagem.errors import ConfigError
from stratagem.settings import Positive, opt, resolved
from stratagem.solvers.dialogue.setup import DialogueSettings

console = Console()


@dataclasses.dataclass(kw_only=True)
class ImitateConfig(RunGroup, DialogueSettings):
    """Train an MLP to imitate CFR's instruction policy.

    Tested on held-out scenarios."""

    game: str = opt(..., "-g")
    """Dialogue game: meeting, fruit, debate."""
    train: Positive = 8
    """Training scenarios."""
    test: Positive = 4
    """Held-out scenarios."""
    iterations: Positive = opt(1000, "-n")
    """CFR+ iterations per tree."""
    hidden: Positive = 128
    """MLP hidden width."""
    steps: Positive = 1000
    """Adam steps."""
    batch_size: Positive = 64
    """Examples per Adam step."""
    lr: Annotated[float, Field(gt=0)] = 1e-3
    """Adam learning rate."""


def imitate_command(cfg: ImitateConfig) -> None:
    """Train an MLP to imitate CFR's instruction policy and test it on held-out scenarios."""
    from stratagem.solvers.games import dialogue_games
    from stratagem.training.steering import prepare_imitation, run_imitation

    if cfg.game not in dialogue_games():
        raise ConfigError(
            f"imitate needs a dialogue game ({', '.join(dialogue_games())}), not {cfg.game!r}"
        )
    prepared = prepare_imitation(cfg)  # all checked before the folder and the first model call
    folder = cfg.run_folder(Path("runs") / f"imitate-{cfg.game}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(resolved(cfg), indent=2) + "\n")
    console.print(run_imitation(cfg, prepared, folder, console.print))
    console.print(
        f"wrote {folder}; steer live dialogues with: stratagem dialogue --game "
        f"{cfg.game} --steer {folder / 'mlp.pt'}"
    )
