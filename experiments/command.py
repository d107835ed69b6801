"""One command of an experiment, built like a ``stratagem`` command: its options come from a
settings dataclass (``--config FILE`` included) and it runs behind the CLI's error boundary."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import typer

from stratagem.cli.main import run_app
from stratagem.cli.options import register

C = TypeVar("C")


def run_command(name: str, settings: type[C], command: Callable[[C], None]) -> None:
    """Parses the command line into ``settings`` and calls ``command`` with it; errors print one
    line (exit 2 for usage, 1 at run time)."""
    app = typer.Typer(
        name=name, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None
    )
    register(app, name, settings, command)
    run_app(app)
