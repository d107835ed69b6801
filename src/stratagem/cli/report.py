"""``stratagem report``: rebuild a run folder's metrics from its traces alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from stratagem.settings import opt

console = Console()


@dataclasses.dataclass(kw_only=True)
class ReportConfig:
    """Rebuild a run folder's metrics from its traces.

    Recomputes and rewrites the metrics (and a Kuhn policy's exact exploitability) from the traces
    alone."""

    run: Path = opt(..., argument=True)
    """A run folder written by `stratagem eval`."""


def report_command(cfg: ReportConfig) -> None:
    """Rebuild a run folder's metrics from its traces."""
    from stratagem.report.console import print_evaluation
    from stratagem.report.rebuild import rebuild_metrics

    print_evaluation(console, rebuild_metrics(cfg.run))
