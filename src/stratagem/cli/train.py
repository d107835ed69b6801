"""``stratagem gen-sft`` and ``stratagem train NAME``.

A trainer's hyperparameters are one dataclass in its module, a docstring per field; the
``train`` commands are generated from those dataclasses by ``cli.options`` (``--learning-rate``
from ``learning_rate``, help from the field's docstring), so there is no second copy of them here.
The trainers are named by import path in ``TRAINERS`` so that listing commands imports no torch.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from stratagem.cli.options import register_lists
from stratagem.errors import ConfigError, UnknownNameError
from stratagem.settings import build
from stratagem.training.sft.args import GenSFTArgs

if TYPE_CHECKING:
    from rich.progress import Progress

console = Console()


def gen_sft_command(cfg: GenSFTArgs) -> None:
    """Write SFT datasets (see ``GenSFTArgs``)."""
    from stratagem.cli.progress import progress_bar
    from stratagem.runs import check_out_path

    check_out_path(cfg.out)
    with progress_bar(console) as progress:
        if cfg.game is None:
            _write_datasets(cfg, progress)
            return
        agents = _chat_agents(cfg)
        card = _write_game_chats(cfg, cfg.game, agents, progress)
    n = len(agents)
    pairs = n * n if cfg.self_play else max(n * (n - 1), 1)
    console.print(f"{pairs * cfg.episodes} episodes of {', '.join(agents)}")
    if card.get("outcomes"):
        o = card["outcomes"]
        agreed = o.get("agreement_share")
        console.print(
            f"kept chats: their seats scored {o['mean_score']:.2f} on average (episode payoff); "
            f"{o['zero_score_share']:.0%} of the chats scored 0"
            + ("" if agreed is None else f"; {agreed:.0%} came from agreements")
        )
    _print_card(cfg.game, card, cfg.out)


def _write_datasets(cfg: GenSFTArgs, progress: Progress) -> None:
    """Writes each of ``cfg.datasets`` (every name checked first) and prints its card."""
    from stratagem.training.sft.data import DATASETS, write_dataset

    for name in cfg.datasets:
        if name not in DATASETS:
            raise UnknownNameError("SFT dataset", name, DATASETS)
    for name in cfg.datasets:
        task = progress.add_task(name, total=sum(DATASETS[name].values()))
        card = write_dataset(
            name,
            cfg.out,
            cfg.seed,
            on_example=functools.partial(progress.advance, task),
            turns=cfg.turns,
        )
        _print_card(name, card, cfg.out)


def _chat_agents(cfg: GenSFTArgs) -> list[str]:
    """The ``--agents`` whose chats ``--game`` simulates; refuses none given, and a
    ``--demonstrators`` name not among them."""
    if not cfg.agents:
        raise ConfigError("--game needs --agents, e.g. --agents FairSplit,ValueGreedy")
    for d in cfg.demonstrators or []:
        if d not in cfg.agents:
            raise UnknownNameError("demonstrator (one of --agents)", d, cfg.agents)
    return cfg.agents


def _write_game_chats(cfg: GenSFTArgs, game: str, agents: list[str], progress: Progress) -> dict:
    """Simulates ``game``'s chats between ``agents``, writes the kept ones; returns their card."""
    from stratagem.games import get_game
    from stratagem.training.sft.data import demonstration_filter, simulated_chats, write_chats

    task = progress.add_task(f"{game} chats", total=None)
    chats = simulated_chats(
        game,
        agents,
        cfg.episodes,
        cfg.seed,
        params=cfg.params or None,
        demonstrators=cfg.demonstrators,
        options=cfg.llm_options(get_game(game, **cfg.params)),
        keep=demonstration_filter(cfg.agreements_only, cfg.min_score),
        self_pairs=cfg.self_play,
    )
    tick = lambda n, t=task: progress.advance(t)  # noqa: E731
    return write_chats(game, chats, cfg.out, cfg.seed, on_example=tick, turns=cfg.turns)


def _print_card(name: str, card: dict, out: Path) -> None:
    rows = " (one row each)" if card.get("layout") == "turns" else ""
    console.print(
        f"{name}: {card['chats']['train']} train + {card['chats']['test']} test chats "
        f"({card['decisions']['train']} + {card['decisions']['test']} decisions{rows}) → "
        f"{out / name} (assistant median {card['assistant_chars']['median']} chars)"
    )


@dataclasses.dataclass(frozen=True)
class Trainer:
    """A ``stratagem train NAME`` command, named by import paths so that listing commands
    imports no torch: ``args`` is the trainer's settings dataclass (one field per option, a
    docstring each, an optional ``check()``), ``train`` is ``train(args, log) -> run folder``;
    ``lists`` are the fields that take several comma-separated values (an ablation)."""

    args: str  # "module:Class"
    train: str  # "module:function"
    help: str
    lists: tuple[str, ...] = ()


TRAINERS: dict[str, Trainer] = {
    "sft": Trainer(
        "stratagem.training.sft.args:SFTArgs",
        "stratagem.training.sft.trainer:train_sft",
        "LoRA SFT on chats written by gen-sft, with TRL.\n\nRank 32, α 64, on the attention "
        "projections; the loss covers every accepted assistant turn of each chat; resumes from "
        "checkpoints.",
    ),
    "sepo": Trainer(
        "stratagem.training.sepo.args:SEPOArgs",
        "stratagem.training.sepo.trainer:train_sepo",
        "SEPO: GRPO against the pools with the safety terms of J.\n\nResumes from the newest "
        "complete checkpoint. Comma-separated values of one of --penalty, --credit, "
        "--normalisation, --scale, --safety or --control run an ablation: one arm per value in "
        "OUT/<name>-<value>, compared in OUT/ablation.md, .csv and .png (--safety 0 --control "
        "none,payoff: the two λ = 0 controls).",
        lists=("penalty", "credit", "normalisation", "scale", "safety", "control"),
    ),
    "bargaining": Trainer(
        "stratagem.training.bargaining.args:BargainingArgs",
        "stratagem.training.bargaining.trainer:train_bargaining",
        "GRPO for bilateral trade against a fixed opponent.\n\nBoth roles; the reward is format "
        "+ execution + consistency + surplus share, and --ir-penalty adds an IR penalty and "
        "walk-away credit in scenarios without gains from trade; checkpoints are scored by a "
        "tournament slice, stages.md compares base, SFT and RL; resumes from the newest "
        "checkpoint.",
    ),
    "selfplay": Trainer(
        "stratagem.training.selfplay.args:SelfPlayArgs",
        "stratagem.training.selfplay.trainer:train_selfplay",
        "Filtered-BC self-play for Deal or No Deal.\n\nK games per iteration between two copies "
        "of the model, SFT on the seats scoring above the mean, evaluation in self-play and "
        "against a fixed agent each iteration; resumes at iteration boundaries.",
    ),
}


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _log(line: str) -> None:
    console.print(line, highlight=False)


def _train(trainer: Trainer, chosen: dict[str, list[Any]]) -> None:
    """Builds the trainer's settings from the chosen values and trains; several values of one
    ``lists`` field run an ablation (SEPO) instead."""
    cls = _load(trainer.args)
    varied = [k for k, v in chosen.items() if len(v) > 1]
    if len(varied) > 1:
        raise ConfigError(f"ablate one setting at a time, not {' and '.join(varied)}")
    args = build(cls, {k: v[0] for k, v in chosen.items()})
    if hasattr(args, "check"):
        args.check()
    if varied:
        from stratagem.training.sepo.ablation import last_checkpoint_markdown, run_ablation

        table = run_ablation(args, varied[0], chosen[varied[0]], log=_log)
        console.print(last_checkpoint_markdown(varied[0], table), highlight=False)
        console.print(f"ablation.md, ablation.csv and ablation.png in {args.out}")
        return
    train = _load(trainer.train)
    result = train(args, **({"log": _log} if "log" in inspect.signature(train).parameters else {}))
    console.print(f"results in {result}")
    for line in _next_steps(args, Path(result)):
        console.print(line, highlight=False)


def _next_steps(args: Any, folder: Path) -> list[str]:
    """How to evaluate what a trainer wrote: the best checkpoint's adapters, or SFT's adapter."""
    games = getattr(args, "games", None)  # SFT: a tuple of game ids; self-play: a count
    game = getattr(args, "game", None) or (games[0] if isinstance(games, tuple) and games else None)
    if (best := folder / "best.json").exists() and game is not None:
        chosen = json.loads(best.read_text())
        stack = ",".join([*filter(None, [chosen.get("below")]), str(folder / chosen["adapter"])])
        return [
            f"best step {chosen['step']} (evaluate with: stratagem eval --game {game} --agent hf "
            f"--adapter {stack})"
        ]
    if (folder / "adapter_config.json").exists():  # SFT: its starting adapters stay under it
        game = game or (args.data_game() if hasattr(args, "data_game") else None) or "GAME"
        stack = ",".join([*filter(None, [getattr(args, "adapter", None)]), str(folder)])
        return [f"evaluate with: stratagem eval --game {game} --agent hf --adapter {stack}"]
    return []


class _TrainGroup(TyperGroup):
    """The ``train`` commands, built on first use: their options come from the trainers'
    dataclasses, whose modules load torch, which ``stratagem games`` must not."""

    wrap: Callable[[Callable], Callable] | None = None

    # typer vendors its own click: its Context and Command types are private to typer, so the
    # overrides take and return them untyped
    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(TRAINERS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        group = typer.main.get_command(_trainers(self.wrap))
        return group.get_command(ctx, cmd_name)  # type: ignore[attr-defined]


def train_app(wrap: Callable[[Callable], Callable] | None = None) -> typer.Typer:
    """The ``train`` group; ``wrap`` (Ctrl-C / SIGTERM handling) wraps every trainer."""
    group = type("TrainGroup", (_TrainGroup,), {"wrap": staticmethod(wrap) if wrap else None})
    return typer.Typer(
        rich_markup_mode=None,
        help="Train a model: " + ", ".join(TRAINERS) + ".",
        no_args_is_help=True,
        cls=group,
    )


@functools.cache
def _trainers(wrap: Callable[[Callable], Callable] | None) -> typer.Typer:
    """A typer app holding one command per trainer."""
    app = typer.Typer(rich_markup_mode=None)
    for name, trainer in TRAINERS.items():
        run = functools.partial(_train, trainer)
        cls = _load(trainer.args)
        register_lists(app, name, cls, run, lists=trainer.lists, help=trainer.help, wrap=wrap)
    return app
