"""The ``stratagem`` typer app and its error boundary.

Errors we raise on purpose print one line (exit 2 for usage errors, 1 for runtime failures);
filesystem errors print one line and exit 1; Ctrl-C and SIGTERM stop cleanly with a shell-quoted
resume command (exit 130 / 143). No user mistake ends in a traceback.

The commands are a table of import paths (``COMMANDS``): ``stratagem --help`` imports none of
them and ``stratagem X`` imports X's module only, whose settings import no model library, so
help and a bad option answer at once.
"""

from __future__ import annotations

import functools
import importlib
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from stratagem.cli.launch import resume_command
from stratagem.cli.options import plain, register
from stratagem.errors import ConfigError, StratagemError

err = Console(stderr=True, soft_wrap=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so it unwinds like Ctrl-C (run status, hint)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def interruptible(command: Callable, kept: str = "every finished episode is saved") -> Callable:
    """Ctrl-C / SIGTERM: say what was ``kept`` and how to resume (a command that can be pasted
    into a shell for any path), exit 130 (SIGINT) or 143 (SIGTERM)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt as exc:
            line = resume_command(sys.argv, getattr(exc, "run_folder", None), kwargs)
            err.print(f"interrupted; {kept}. Resume with: {line}", highlight=False, markup=False)
            raise typer.Exit(143 if isinstance(exc, Terminated) else 130) from None

    return run


answers = functools.partial(  # solve, psro, imitate: model answers are cached as they come
    interruptible, kept="results are written at the end; model answers so far stay in the cache"
)
trained = functools.partial(interruptible, kept="every finished checkpoint is kept")
WRAPS: dict[str, Callable[[Callable], Callable]] = {
    "episodes": interruptible,
    "answers": answers,
    "checkpoints": trained,
}


@dataclass(frozen=True)
class Command:
    """A top-level command, named by import paths: ``module`` (under ``stratagem.cli``), its
    ``settings`` class (None: ``run`` is a plain typer function) and the function it ``run``s;
    ``summary`` is its line in ``stratagem --help`` (the first line of its own help, tested);
    ``wrap`` names what Ctrl-C / SIGTERM say was kept (a key of ``WRAPS``)."""

    module: str
    settings: str | None
    run: str
    summary: str
    wrap: str | None = None


def _cmd(module: str, settings: str | None, run: str, summary: str, wrap: str | None = None):
    return Command(module, settings, run, summary, wrap)


COMMANDS: dict[str, Command] = {
    "games": _cmd("info", None, "games", "List every game with its parameters and pools."),
    "strategies": _cmd(
        "info",
        "StrategiesConfig",
        "list_strategies",
        "List a game's strategies, their pools and SFT weights.",
    ),
    "eval": _cmd(
        "evaluate",
        "EvalConfig",
        "eval_command",
        "Evaluate an agent against every pool of a game.",
        "episodes",
    ),
    "tournament": _cmd(
        "tournament",
        "TournamentConfig",
        "tournament_command",
        "Play every agent against every agent, in both seats.",
        "episodes",
    ),
    "matrix": _cmd(
        "matrix",
        "MatrixConfig",
        "matrix_command",
        "Play every strategy against every strategy of a game.",
    ),
    "report": _cmd(
        "report",
        "ReportConfig",
        "report_command",
        "Rebuild a run folder's metrics from its traces.",
    ),
    "acceptance": _cmd(
        "acceptance",
        "AcceptanceConfig",
        "acceptance_command",
        "Probe whether a bargaining agent accepts a loss.",
    ),
    "gen-sft": _cmd(
        "train",
        "GenSFTArgs",
        "gen_sft_command",
        "Write SFT datasets of demonstrators' chats.",
        "episodes",
    ),
    "train": _cmd(
        "train", None, "train_app", "Train a model: sft, sepo, bargaining, selfplay.", "checkpoints"
    ),
    "selfplay-eval": _cmd(
        "selfplay_eval",
        "SelfPlayEvalConfig",
        "selfplay_eval_command",
        "Evaluate a self-play run's checkpoints on more games.",
        "episodes",
    ),
    "solve": _cmd(
        "solve",
        "SolveConfig",
        "solve_command",
        "Solve a poker game or a dialogue game with CFR.",
        "answers",
    ),
    "psro": _cmd(
        "psro",
        "PSROConfig",
        "psro_command",
        "Grow each seat's population by PSRO best responses.",
        "answers",
    ),
    "imitate": _cmd(
        "imitate",
        "ImitateConfig",
        "imitate_command",
        "Train an MLP to imitate CFR's instruction policy.",
        "answers",
    ),
    "dialogue": _cmd(
        "dialogue",
        "DialogueConfig",
        "dialogue_command",
        "Play live dialogues steered by a policy.",
        "answers",
    ),
    "serve": _cmd(
        "serve",
        "ServeSettings",
        "serve_command",
        "Serve the play page, or export its stored games.",
    ),
}


# commands that moved out of the package: the old name says where they went
MOVED = {
    "claim-probe": "python -m experiments.claim_probe (from the repository root)",
    "drills": "python -m experiments.drills (from the repository root)",
}


def load_command(name: str) -> Any:
    """The click command ``name``, built from its module (importing that module only)."""
    entry = COMMANDS[name]
    module = importlib.import_module(f"stratagem.cli.{entry.module}")
    run = getattr(module, entry.run)
    wrap = WRAPS[entry.wrap] if entry.wrap else None
    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    if name == "train":  # a group of its own: one command per trainer
        single.add_typer(run(wrap), name=name)
        return typer.main.get_command(single).commands[name]  # type: ignore[attr-defined]
    if entry.settings is None:
        single.command(name, help=plain(run.__doc__ or ""))(run)
    else:
        register(single, name, getattr(module, entry.settings), run, wrap=wrap)
    command = typer.main.get_command(single)
    command.name = name
    return command


class _Commands(TyperGroup):
    """The top-level commands, each loaded when it runs or is asked for its help."""

    _listing = False

    # typer vendors its own click: its Context and Command types are private to typer, so the
    # overrides take and return them untyped
    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in MOVED:
            raise ConfigError(f"stratagem {cmd_name} moved: run {MOVED[cmd_name]}")
        if cmd_name not in COMMANDS:
            return None
        if self._listing:  # the group's help lists one line per command and loads none
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name].summary, callback=None)
        return load_command(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="stratagem",
    help="Language-model agents in strategic games: play, evaluate, train and steer them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    cls=_Commands,
)


@app.callback()
def _root() -> None:
    """Language-model agents in strategic games: play, evaluate, train and steer them."""


def main() -> None:
    """The console entry point: run the app behind the error boundary."""
    run_app(app)


def run_app(typer_app: typer.Typer) -> None:
    """Runs ``typer_app`` behind the error boundary: our errors and filesystem errors print one
    line, Ctrl-C and SIGTERM exit 130 / 143 (scripts built on the library use it too)."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        typer_app()  # usage errors are typer's own: a short message and exit 2
    except StratagemError as exc:
        _one_line(str(exc))
        sys.exit(exc.exit_code)
    except OSError as exc:  # a filesystem failure we did not anticipate: still one line
        where = f" ({exc.filename})" if exc.filename else ""
        _one_line(f"{exc.strerror or exc}{where}")
        sys.exit(1)
    except KeyboardInterrupt as exc:  # outside a command (while importing, parsing options)
        err.print("interrupted")
        sys.exit(143 if isinstance(exc, Terminated) else 130)


def _one_line(message: str) -> None:
    err.print(
        "error: " + " ".join(message.split()), highlight=False, markup=False, style="bold red"
    )


if __name__ == "__main__":
    main()
