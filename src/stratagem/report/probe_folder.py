"""What the probe commands (``acceptance``, ``python -m experiments.claim_probe``) share: a probe
set whose model calls
failed stops the command before anything is written, and a finished one is written as one
folder — a JSON summary, a plot and every probe episode's trace."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from stratagem.errors import IncompleteRunError
from stratagem.trace import Trace


def refuse_failed(errors: Sequence[str], what: str) -> None:
    """Raises ``IncompleteRunError`` when any probe of ``what`` failed (a failed model call is
    never read as an answer, so nothing is written and a rerun retries)."""
    if errors:
        raise IncompleteRunError(
            f"{len(errors)} probes of {what} failed (first: {errors[0]}); nothing written, "
            "rerun to retry"
        )


def write_probe_folder(
    out: str,
    summary: tuple[str, Any],
    plot: tuple[str, Callable[[Path], None]],
    traces: Iterable[Trace],
    console: Console,
) -> None:
    """Writes ``summary`` (file name, JSON value), ``plot`` (file name, a function that draws to
    a path) and ``traces`` (``traces.jsonl``) to the folder ``out``, and says so."""
    from stratagem.runs import TRACES
    from stratagem.trace import write_traces

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / summary[0]).write_text(json.dumps(summary[1], indent=1))
    write_traces(folder / TRACES, traces)
    plot[1](folder / plot[0])
    console.print(f"written: {', '.join(str(folder / f) for f in (summary[0], plot[0], TRACES))}")
