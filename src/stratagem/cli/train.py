"""``stratagem gen-sft`` and ``stratagem train sft|sepo``.

A trainer's hyperparameters are one dataclass at the top of its module, a docstring per field
(``SFTArgs``, ``SEPOArgs``); ``dataclass_options`` turns its fields into the command's options
(``--learning-rate`` from ``learning_rate``, help from the field's docstring, the default shown),
so there is no second copy of them here. ``--config FILE`` (YAML or TOML) sets any of them; flags
given on the command line win.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import textwrap
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

from stratagem.cli.progress import progress_bar
from stratagem.errors import ConfigError, UnknownNameError, did_you_mean
from stratagem.training.sft_data import DATASETS, write_dataset

console = Console()


def gen_sft_command(
    out: Path = typer.Option(Path("data/sft"), "--out", "-o", help="Output folder."),
    datasets: str = typer.Option(
        ",".join(DATASETS), help="Comma-separated: multi, kuhn, multi_issue."
    ),
    seed: int = typer.Option(42, "--seed", "-s"),
    game: str | None = typer.Option(
        None,
        "--game",
        "-g",
        help="Instead of the SEPO datasets: chats of any game played by --agents (e.g. dond, "
        "bargaining), written to OUT/GAME.",
    ),
    agents: str | None = typer.Option(
        None,
        "--agents",
        "-a",
        help="With --game: comma-separated agents (strategy names, hf, openai:MODEL); every "
        "ordered pair plays --episodes episodes.",
    ),
    episodes: int = typer.Option(20, "--episodes", "-n", help="With --game: per ordered pair."),
    demonstrators: str | None = typer.Option(
        None, help="With --game: whose seats become chats (default: every agent's)."
    ),
    params: list[str] | None = typer.Option(
        None, "--param", "-p", help="Game parameter KEY=VALUE (JSON value); repeatable."
    ),
    turns: bool = typer.Option(
        False,
        "--turns",
        help="One row per assistant turn (prompt = the earlier turns, <think> stripped; "
        "completion = the turn) in TRL's prompt/completion format, instead of one chat per seat.",
    ),
    max_new_tokens: int = typer.Option(
        256, help="With --game: generated tokens per decision of hf / openai agents."
    ),
    temperature: float = typer.Option(
        0.0, help="With --game: sampling temperature of hf / openai agents (0: greedy)."
    ),
    base_url: str | None = typer.Option(
        None, help="With --game: the OpenAI-compatible endpoint of openai:MODEL agents."
    ),
) -> None:
    """Write SFT datasets: one multi-turn chat per (episode, seat) (or, with --turns, one row
    per assistant turn), 80/20 split by chat, JSONL + dataset card. Default: the SEPO datasets of
    rule-based demonstrators (App. H sizes, counted in decisions); with --game, the dialogues of
    --agents (bargaining: the rule-based bargainers write templated Thought/Code turns)."""
    from stratagem.agents.spec import LLMOptions
    from stratagem.runs import check_out_path

    check_out_path(out)
    if game is not None:
        options = LLMOptions(
            temperature=temperature, max_new_tokens=max_new_tokens, base_url=base_url
        )
        _gen_game_chats(
            out, game, agents, episodes, demonstrators, params, seed, options=options, turns=turns
        )
        return
    names = [d.strip() for d in datasets.split(",") if d.strip()]
    for name in names:
        if name not in DATASETS:
            raise UnknownNameError("SFT dataset", name, DATASETS)
    with progress_bar(console) as progress:
        for name in names:
            task = progress.add_task(name, total=sum(DATASETS[name].values()))
            card = write_dataset(
                name, out, seed, on_example=lambda n=1, t=task: progress.advance(t, n), turns=turns
            )
            _print_card(name, card, out)


def _print_card(name: str, card: dict, out: Path) -> None:
    rows = " (one row each)" if card.get("layout") == "turns" else ""
    console.print(
        f"{name}: {card['chats']['train']} train + {card['chats']['test']} test chats "
        f"({card['decisions']['train']} + {card['decisions']['test']} decisions{rows}) → "
        f"{out / name} (assistant median {card['assistant_chars']['median']} chars)"
    )


def _gen_game_chats(
    out, game, agents, episodes, demonstrators, params, seed, *, options=None, turns=False
) -> None:
    from stratagem.cli.config import parse_params
    from stratagem.training.sft_data import simulated_chats, write_chats

    if not agents:
        raise ConfigError("--game needs --agents, e.g. --agents FairSplit,ValueGreedy")
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    names = [a.strip() for a in agents.split(",") if a.strip()]
    chosen = [d.strip() for d in demonstrators.split(",")] if demonstrators else None
    for d in chosen or []:
        if d not in names:
            raise UnknownNameError("demonstrator (one of --agents)", d, names)
    pairs = max(len(names) * (len(names) - 1), 1)
    with progress_bar(console) as progress:
        task = progress.add_task(f"{game} chats", total=None)
        chats = simulated_chats(
            game,
            names,
            episodes,
            seed,
            params=parse_params(params),
            demonstrators=chosen,
            options=options,
        )
        card = write_chats(
            game, chats, out, seed, on_example=lambda n, t=task: progress.advance(t), turns=turns
        )
    console.print(f"{pairs * episodes} episodes of {', '.join(names)}")
    _print_card(game, card, out)


@dataclasses.dataclass(frozen=True)
class Trainer:
    """A ``stratagem train NAME`` command beyond sft and sepo, named by import paths so that
    listing commands imports no torch: ``args`` is the trainer's settings dataclass (one field per
    option, a docstring each, an optional ``check()``), ``train`` is ``train(args, log) -> run
    folder``."""

    args: str  # "module:Class"
    train: str  # "module:function"
    help: str


TRAINERS: dict[str, Trainer] = {
    # "name": Trainer("module:ArgsClass", "module:train_function", "one-line help"),
    "bargaining": Trainer(
        "stratagem.training.bargaining_grpo:BargainingArgs",
        "stratagem.training.bargaining_grpo:train_bargaining",
        "GRPO for bilateral trade against a fixed opponent in both roles; reward = format + "
        "execution + consistency + surplus share (seed 004), --ir-penalty adds an IR penalty and "
        "NGFT walk-away credit; checkpoints scored by a tournament slice, stages.md = Base → SFT "
        "→ RL; resumes from the newest checkpoint.",
    ),
    "selfplay": Trainer(
        "stratagem.training.selfplay:SelfPlayArgs",
        "stratagem.training.selfplay:train_selfplay",
        "Filtered-BC self-play for Deal or No Deal: K games per iteration between two copies of "
        "the model, SFT on the seats scoring above the mean, evaluation in self-play and against "
        "a fixed agent each iteration; resumes at iteration boundaries.",
    ),
}


def _load(path: str) -> Any:
    import importlib

    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class _TrainGroup(TyperGroup):
    """The ``train`` commands, built on first use: their options come from the trainers'
    dataclasses, whose modules load torch, which ``stratagem games`` must not."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(["sepo", "sft", *TRAINERS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return typer.main.get_command(_trainers()).get_command(ctx, cmd_name)  # type: ignore[attr-defined]


train_app = typer.Typer(
    help="Train a model: sft (LoRA with TRL), sepo (SEPO-GRPO), and the trainers registered in "
    "stratagem.cli.train.TRAINERS.",
    no_args_is_help=True,
    cls=_TrainGroup,
)


# ---- dataclass -> options ----


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of dataclass ``cls`` (its source), by field name."""
    source = textwrap.dedent(inspect.getsource(cls))
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.replace("``", "").split())
    return docs


def _core(annotation: Any) -> Any:
    """``X | None`` -> X."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _choices(annotation: Any) -> tuple[str, ...] | None:
    core = _core(annotation)
    return typing.get_args(core) if typing.get_origin(core) is Literal else None


def _is_sequence(annotation: Any) -> bool:
    return typing.get_origin(_core(annotation)) in (list, tuple)


def _cli_type(annotation: Any) -> type:
    core = _core(annotation)
    if core in (bool, int, float, Path):
        return core
    return str  # str, Literal choices (checked later), comma-separated lists


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) or '""'
    return str(value)


def dataclass_options(cls: type, *, lists: tuple[str, ...] = ()) -> list[inspect.Parameter]:
    """One keyword option per field of ``cls``: ``--field-name``, help from the field's
    docstring (the default appended), None unless given. Fields named in ``lists`` accept
    comma-separated values (an ablation)."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    params = []
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        annotation = hints[f.name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        help_text = docs.get(f.name, "")
        choices = _choices(annotation)
        if choices:
            help_text += f" Choices: {', '.join(choices)}."
            if f.name in lists:
                help_text += " Several, comma-separated: an ablation."
        help_text += f" (default: {_show(default)})"
        cli_type = _cli_type(annotation)
        decls = [f"{flag}/--no-{flag[2:]}"] if cli_type is bool else [flag]
        params.append(
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=typer.Option(None, *decls, help=help_text, show_default=False),
                annotation=cli_type | None,  # type: ignore[operator]
            )
        )
    return params


CONFIG_OPTION = inspect.Parameter(
    "config",
    inspect.Parameter.KEYWORD_ONLY,
    default=typer.Option(None, "--config", "-c", help="A YAML or TOML file of these settings."),
    annotation=Path | None,
)


def settings(
    cls: type, given: dict[str, Any], config: Path | None, *, lists: tuple[str, ...] = ()
) -> dict[str, list[Any]]:
    """Every setting of ``cls`` a user chose, file first and flags on top, checked: each as a
    list of values (several only for the ``lists`` fields)."""
    from stratagem.cli.config import _read

    hints = typing.get_type_hints(cls)
    chosen: dict[str, Any] = _read(config) if config is not None else {}
    for key in chosen:
        if key not in hints:
            raise ConfigError(
                f"unknown setting {key!r}{did_you_mean(key, hints)} in {config}; "
                f"valid settings: {', '.join(hints)}"
            )
    chosen.update({k: v for k, v in given.items() if v is not None})
    out: dict[str, list[Any]] = {}
    for key, value in chosen.items():
        annotation = hints[key]
        if _is_sequence(annotation) and isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if key in lists and isinstance(value, str):
            values = [v.strip() for v in value.split(",") if v.strip()]
        else:
            values = [value]
        choices = _choices(annotation)
        for v in values:
            if choices and v is not None and v not in choices:
                raise UnknownNameError(key, str(v), choices)
        out[key] = values
    return out


def build(cls: type, values: dict[str, Any]) -> Any:
    """An instance of dataclass ``cls`` from setting values (validated by pydantic)."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(cls).validate_python(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(x) for x in err["loc"])
        flag = "--" + key.replace("_", "-")
        raise ConfigError(
            f"bad value for {flag}: {err['msg']} (got {err.get('input')!r})"
        ) from None


def dataclass_command(
    app: typer.Typer,
    name: str,
    cls: type,
    run: Callable[..., None],
    *,
    help: str,
    lists: tuple[str, ...] = (),
) -> None:
    """Register ``app`` command ``name`` whose options are ``cls``'s fields (and ``--config``);
    it calls ``run(settings)`` with the chosen settings as ``{field: [values]}``."""

    def command(**kwargs: Any) -> None:
        config = kwargs.pop("config")
        run(settings(cls, kwargs, config, lists=lists))

    command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*dataclass_options(cls, lists=lists), CONFIG_OPTION]
    )
    command.__doc__ = help
    command.__name__ = f"{name}_command"
    app.command(name)(command)


# ---- train sft ----


def _sft(chosen: dict[str, list[Any]]) -> None:
    from stratagem.training.sft import SFTArgs, train_sft

    args = build(SFTArgs, {k: v[0] for k, v in chosen.items()})
    if not (args.data / "train.jsonl").exists():
        raise ConfigError(f"{args.data} holds no train.jsonl; write one with `stratagem gen-sft`")
    adapter = train_sft(args)
    game = args.games[0] if args.games else args.data.name
    console.print(
        f"adapter: {adapter} (evaluate with: stratagem eval --game {game} --agent hf "
        f"--adapter {adapter})"
    )


def _sepo(chosen: dict[str, list[Any]]) -> None:
    from stratagem.training.ablation import AXES, last_checkpoint_markdown, run_ablation
    from stratagem.training.sepo import SEPOArgs, train_sepo

    varied = [k for k, v in chosen.items() if len(v) > 1]
    if len(varied) > 1:
        raise ConfigError(f"ablate one setting at a time, not {' and '.join(varied)}")
    args = build(SEPOArgs, {k: v[0] for k, v in chosen.items()})
    args.check()
    if varied:
        axis = varied[0]
        table = run_ablation(
            args, axis, chosen[axis], log=lambda line: console.print(line, highlight=False)
        )
        console.print(last_checkpoint_markdown(axis, table), highlight=False)
        console.print(f"ablation.md, ablation.csv and ablation.png in {args.out}")
        return
    assert all(axis in AXES for axis in ("penalty", "credit", "normalisation", "scale"))
    folder = train_sepo(args, log=lambda line: console.print(line, highlight=False))
    console.print(f"checkpoints, best.json and curve.png in {folder}")
    best = folder / "best.json"
    if best.exists():
        chosen_best = json.loads(best.read_text())
        stack = ",".join(
            [*filter(None, [chosen_best.get("below")]), str(folder / chosen_best["adapter"])]
        )
        console.print(
            f"best by Safety J: step {chosen_best['step']} (evaluate with: stratagem eval "
            f"--game {args.game} --agent hf --adapter {stack})"
        )


def _generic(trainer: Trainer, chosen: dict[str, list[Any]]) -> None:
    args = build(_load(trainer.args), {k: v[0] for k, v in chosen.items()})
    if hasattr(args, "check"):
        args.check()
    folder = _load(trainer.train)(args, log=lambda line: console.print(line, highlight=False))
    console.print(f"results in {folder}")


@functools.cache
def _trainers() -> typer.Typer:
    """A typer app holding ``sft`` and ``sepo`` (Ctrl-C / SIGTERM handled as everywhere)."""
    from stratagem.cli.main import interruptible
    from stratagem.training.sepo import SEPOArgs
    from stratagem.training.sft import SFTArgs

    app = typer.Typer()
    dataclass_command(
        app,
        "sft",
        SFTArgs,
        _sft,
        help="LoRA SFT (rank 32, α 64, attention projections) with TRL, loss on every assistant "
        "turn of each chat; resumes from checkpoints.",
    )
    dataclass_command(
        app,
        "sepo",
        SEPOArgs,
        _sepo,
        lists=("penalty", "credit", "normalisation", "scale"),
        help="SEPO-GRPO; resumes from the newest complete checkpoint. Comma-separated values of "
        "one of --penalty, --credit, --normalisation or --scale run an ablation: one arm per "
        "value in OUT/<name>-<value>, compared in OUT/ablation.md, .csv and .png.",
    )
    for name, trainer in TRAINERS.items():
        dataclass_command(
            app, name, _load(trainer.args), functools.partial(_generic, trainer), help=trainer.help
        )
    app.registered_commands = [
        type(c)(**{**vars(c), "callback": interruptible(c.callback)})
        for c in app.registered_commands
    ]
    return app
