"""``python -m experiments.drills --game G --drills N``: write N drills of one game as an
ordinary SFT folder, OUT/G-drills (``train.jsonl``, ``test.jsonl``, ``card.json``), which
``stratagem train sft --data OUT/G-drills`` reads like any ``gen-sft`` folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from experiments.command import run_command
from experiments.drills import drills
from experiments.drills.settings import DrillSettings
from stratagem.errors import ConfigError
from stratagem.settings import OutFolder, opt

console = Console()


@dataclasses.dataclass(kw_only=True)
class DrillsConfig(DrillSettings):
    """Write drills of one game to OUT/GAME-drills, an SFT folder that train sft reads."""

    game: str | None = opt(None, "-g")
    """The game: bargaining or dond."""
    out: OutFolder = opt(Path("data/sft"), "-o")
    """Output folder; the drills go to OUT/GAME-drills."""
    seed: int = opt(42, "-s")
    """Seed of the drills and of the 80/20 split."""


def write_drills(cfg: DrillsConfig) -> None:
    """Write drills of one game to OUT/GAME-drills, an SFT folder that train sft reads."""
    from stratagem.cli.progress import progress_bar
    from stratagem.runs import check_out_path
    from stratagem.training.sft.data import write_chats

    check_out_path(cfg.out)
    options = cfg.drill_options()  # an option without --drills N is refused
    if not cfg.drills:
        raise ConfigError("--drills N: how many drills to write, e.g. --game dond --drills 2000")
    chats = drills(cfg.game, cfg.drills, cfg.seed, **options)
    name = f"{cfg.game}-drills"
    with progress_bar(console) as progress:
        task = progress.add_task(name, total=cfg.drills)
        card = write_chats(
            name, chats, cfg.out, cfg.seed, on_example=lambda n: progress.advance(task)
        )
    console.print(
        f"{name}: {card['chats']['train']} train + {card['chats']['test']} test chats → "
        f"{Path(cfg.out) / name}"
    )


if __name__ == "__main__":
    run_command("drills", DrillsConfig, write_drills)
