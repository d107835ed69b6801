"""The ``stratagem`` typer app; errors we raise on purpose print one line and exit 2."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

import typer
from rich.console import Console

from stratagem.cli import evaluate, info, matrix, report, tournament, train
from stratagem.errors import StratagemError

app = typer.Typer(
    name="stratagem",
    help="Language-model agents in strategic games: play, evaluate, train and steer them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err = Console(stderr=True, soft_wrap=True)


def interruptible(command: Callable) -> Callable:
    """Ctrl-C / SIGINT: finished episodes are already on disk; say how to resume, exit 130."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            line = " ".join(["stratagem", *sys.argv[1:]])
            err.print(
                f"interrupted; every finished episode is saved. Resume with: {line}",
                highlight=False,
            )
            raise typer.Exit(130) from None

    return run


app.command("games")(info.games)
app.command("strategies")(info.list_strategies)
app.command("eval")(interruptible(evaluate.eval_command))
app.command("matrix")(matrix.matrix_command)
app.command("report")(report.report_command)
app.command("tournament")(interruptible(tournament.tournament_command))
app.command("gen-sft")(interruptible(train.gen_sft_command))
train.train_app.registered_commands = [
    type(c)(**{**vars(c), "callback": interruptible(c.callback)})
    for c in train.train_app.registered_commands
]
app.add_typer(train.train_app, name="train")


def main() -> None:
    try:
        app()  # usage errors are typer's own: a short message and exit 2
    except StratagemError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # outside a command (while importing, parsing options)
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
