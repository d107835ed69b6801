"""The ``stratagem`` typer app; errors we raise on purpose print one line and exit 2."""

from __future__ import annotations

import sys

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
app.command("games")(info.games)
app.command("strategies")(info.list_strategies)
app.command("eval")(evaluate.eval_command)
app.command("matrix")(matrix.matrix_command)
app.command("report")(report.report_command)
app.command("tournament")(tournament.tournament_command)
app.command("gen-sft")(train.gen_sft_command)
app.add_typer(train.train_app, name="train")

err = Console(stderr=True, soft_wrap=True)


def main() -> None:
    try:
        app()  # usage errors are typer's own: a short message and exit 2
    except StratagemError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        command = " ".join(["stratagem", *sys.argv[1:]])
        err.print(f"interrupted; every finished episode is saved. Resume with: {command}")
        sys.exit(130)


if __name__ == "__main__":
    main()
