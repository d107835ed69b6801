"""The ``stratagem`` typer app and its error boundary.

Errors we raise on purpose print one line (exit 2 for usage errors, 1 for runtime failures);
filesystem errors print one line and exit 1; Ctrl-C and SIGTERM stop cleanly with a shell-quoted
resume command (exit 130 / 143). No user mistake ends in a traceback.
"""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable

import typer
from rich.console import Console

from stratagem.cli import dialogue as live
from stratagem.cli import evaluate, imitate, info, matrix, psro, report, serve, solve, tournament
from stratagem.cli import train as training
from stratagem.cli.acceptance import AcceptanceConfig, acceptance_command
from stratagem.cli.launch import resume_command
from stratagem.cli.options import register
from stratagem.cli.selfplay_eval import SelfPlayEvalConfig, selfplay_eval_command
from stratagem.errors import StratagemError

app = typer.Typer(
    name="stratagem",
    help="Language-model agents in strategic games: play, evaluate, train and steer them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
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
app.command("games")(info.games)
register(app, "strategies", info.StrategiesConfig, info.list_strategies)
register(app, "eval", evaluate.EvalConfig, evaluate.eval_command, wrap=interruptible)
register(app, "acceptance", AcceptanceConfig, acceptance_command)
register(app, "matrix", matrix.MatrixConfig, matrix.matrix_command)
register(app, "report", report.ReportConfig, report.report_command)
register(app, "solve", solve.SolveConfig, solve.solve_command, wrap=answers)
register(app, "psro", psro.PSROConfig, psro.psro_command, wrap=answers)
register(app, "imitate", imitate.ImitateConfig, imitate.imitate_command, wrap=answers)
register(app, "dialogue", live.DialogueConfig, live.dialogue_command, wrap=answers)
register(app, "serve", serve.ServeSettings, serve.serve_command)
register(
    app,
    "tournament",
    tournament.TournamentConfig,
    tournament.tournament_command,
    wrap=interruptible,
)
register(app, "selfplay-eval", SelfPlayEvalConfig, selfplay_eval_command, wrap=interruptible)
register(app, "gen-sft", training.GenSFTArgs, training.gen_sft_command, wrap=interruptible)
trained = functools.partial(interruptible, kept="every finished checkpoint is kept")
app.add_typer(training.train_app(trained), name="train")


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
