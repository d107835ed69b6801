"""The settings of ``stratagem gen-sft`` and ``stratagem train sft``: one dataclass each, a
docstring per field (SEPO App. H for the defaults). Kept apart from the data writer and the
trainer so that ``--help`` and a settings check load no model library.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stratagem.agents.settings import LLMSettings
from stratagem.errors import ConfigError
from stratagem.settings import (
    Distinct,
    OutFolder,
    Positive,
    PositiveFloat,
    normal_path,
    normal_paths,
    opt,
)
from stratagem.training.args import (
    TARGET_MODULES,
    PolicyArgs,
    RunArgs,
    TRLArgs,
    check_adapters,
)


@dataclasses.dataclass(kw_only=True)
class GenSFTArgs(LLMSettings):
    """Write SFT datasets of demonstrators' chats.

    One multi-turn chat per (episode, seat) (or, with --turns, one row per assistant turn), 80/20
    split by chat, JSONL + dataset card. Default: the SEPO datasets of rule-based demonstrators (the
    SEPO paper's sizes, counted in decisions); with --game, the dialogues of --agents (bargaining:
    the rule-based bargainers write templated Thought/Code turns)."""

    out: OutFolder = opt(Path("data/sft"), "-o")
    """Output folder."""
    datasets: list[str] = opt(["multi", "kuhn", "multi_issue"])
    """The SEPO datasets to write: multi, kuhn, multi_issue."""
    seed: int = opt(42, "-s")
    """Seed of the episodes and the split."""
    game: str | None = opt(None, "-g")
    """Instead of the SEPO datasets: chats of any game played by --agents, written to OUT/GAME."""
    params: dict[str, Any] = opt({}, "--param", "-p")
    """Game parameter KEY=VALUE (JSON value); repeatable."""
    agents: Distinct | None = opt(None, "-a")
    """With --game: agents (strategy names, hf, openai:MODEL); every ordered pair plays."""
    episodes: Positive = opt(20, "-n")
    """With --game: episodes per ordered pair."""
    demonstrators: list[str] | None = None
    """With --game: whose seats become chats [every agent's]."""
    turns: bool = False
    """One row per assistant turn (prompt = the earlier turns; completion = the turn) in TRL's
    prompt/completion format, instead of one chat per seat."""
    self_play: bool = True
    """With --game: each agent also plays itself (both seats), besides every other agent."""
    agreements_only: bool = False
    """With --game: keep only the chats of episodes that ended in an agreement (a round's
    `agreement` or `deal`); games that record neither are refused."""
    min_score: float | None = None
    """With --game: keep only the chats whose seat scored at least this (its episode payoff)."""


@dataclass
class SFTArgs(TRLArgs, RunArgs, PolicyArgs):
    """Hyperparameters of ``stratagem train sft`` (defaults: SEPO App. H)."""

    data: tuple[Path, ...] = (Path("data/sft/kuhn"),)
    """Folders with train.jsonl and test.jsonl from ``stratagem gen-sft``; several are one data
    set: their train rows in the order given, their test rows interleaved, each folder once."""
    games: tuple[str, ...] = ()
    """Train on these games' chats only (e.g. ipd out of multi); empty: all."""
    out: OutFolder = Path("runs/sft")
    """The run folder: checkpoints and the final adapter (out/adapter)."""
    lora_rank: int = opt(32, "--rank")
    """LoRA rank."""
    lora_alpha: int = opt(64, "--alpha")
    """LoRA α."""
    target_modules: list[str] = field(default_factory=lambda: list(TARGET_MODULES))
    """LoRA targets: the attention projections of the language model only."""
    learning_rate: PositiveFloat = 2e-5
    """Peak learning rate (paper: 2e-5; the CPU demo uses 2e-4)."""
    max_steps: int = -1
    """A step budget (-1: run the epochs)."""
    eval_examples: int = 200
    """Test-split chats used for the eval loss (the full split is slow on a CPU)."""
    eval_steps: int = 50
    """Evaluate every this many steps."""
    save_steps: int = 50
    """Checkpoint every this many steps."""
    save_total_limit: int | None = None
    """Keep only this many checkpoints; unset: all."""
    seed: int = 42
    """Seeds the shuffling and the adapter initialisation."""
    merge: bool = False
    """Also write the adapter merged into the base weights (out/merged)."""
    bf16: bool = False
    """bf16 weights (GPU)."""

    @property
    def folders(self) -> list[Path]:
        """The data folders (one ``Path`` given directly counts as one)."""
        data: Any = self.data
        return [Path(data)] if isinstance(data, str | Path) else [Path(d) for d in data]

    def check(self) -> None:
        """Refuses no data folder, a data folder without ``train.jsonl``, or a starting adapter
        folder without ``adapter_config.json``, before any weights load."""
        if not self.folders:
            raise ConfigError("--data names no folder; write one with `stratagem gen-sft`")
        resolved = [normal_path(folder) for folder in self.folders]
        twice = sorted({path for path in resolved if resolved.count(path) > 1})
        if twice:  # rows read twice would weigh double, silently
            raise ConfigError(f"--data names {', '.join(twice)} more than once")
        for folder in self.folders:
            if not (folder / "train.jsonl").exists():
                raise ConfigError(
                    f"{folder} holds no train.jsonl; write one with `stratagem gen-sft`"
                )
        check_adapters(self)

    def fingerprint(self) -> dict[str, Any]:
        """The settings that identify a run, as JSON values: the step budget, the checkpoint and
        evaluation cadence, the eval examples, the disk policy and ``merge`` are left out (a run
        may be extended, or checkpointed and evaluated otherwise); paths are resolved, so a
        folder named another way is the same run."""
        d = asdict(self)
        for runtime in (
            "max_steps",
            "save_total_limit",
            "save_steps",
            "eval_steps",
            "eval_examples",
            "merge",
        ):
            d.pop(runtime)
        d["data"] = [normal_path(folder) for folder in self.folders]
        d["out"], d["adapter"] = normal_path(self.out), normal_paths(self.adapter)
        return d

    def data_game(self) -> str | None:
        """The one game all data folders hold, else None."""
        games = {_folder_game(folder) for folder in self.folders}
        return games.pop() if len(games) == 1 else None


def _folder_game(folder: Path) -> str | None:
    """The one game a data folder holds (its ``gen-sft`` card's ``per_game``; a drills folder is
    named GAME-drills), else the folder's name when that is a game, else None."""
    from stratagem.games import game_names

    try:
        games = list(json.loads((folder / "card.json").read_text())["per_game"])
    except (OSError, ValueError, KeyError, TypeError):
        games = []
    if len(games) == 1:
        return games[0]
    return folder.name if folder.name in game_names() else None
