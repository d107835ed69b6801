"""``stratagem report``: rebuild a run folder's metrics from its traces alone."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from stratagem.cli.evaluate import print_evaluation
from stratagem.errors import ConfigError
from stratagem.evaluation import POLICY, Evaluation
from stratagem.games import get_game
from stratagem.games.kuhn import game_tree
from stratagem.metrics.sepo import sepo_metrics
from stratagem.report.tables import write_metrics
from stratagem.runs import TRACES, read_fingerprint
from stratagem.solvers.best_response import exploitability
from stratagem.trace import read_traces


def report_command(run: Path = typer.Argument(..., help="A run folder written by `eval`.")) -> None:
    """Recompute and rewrite the metrics of a run folder from its traces (and Kuhn policy)."""
    if not (run / TRACES).exists():
        raise ConfigError(f"{run} holds no {TRACES}; pass a run folder written by `stratagem eval`")
    fp = read_fingerprint(run)
    game = get_game(fp["game"])
    normalise = fp.get("normalise", False)
    traces = read_traces(run / TRACES)
    metrics = sepo_metrics(traces, game, normalise=normalise)
    exact = policy = None
    if (run / POLICY).exists():
        policy = json.loads((run / POLICY).read_text())
        exact = exploitability(game_tree(), policy)
    write_metrics(run, metrics, exact, normalise)
    print_evaluation(
        Evaluation(game.name, fp["agent"], metrics, traces, exact, policy, normalise, out=run)
    )
