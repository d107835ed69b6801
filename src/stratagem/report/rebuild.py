"""Rebuilding an evaluation run folder's metrics from its traces alone (``stratagem report``)."""

from __future__ import annotations

import json
from pathlib import Path

from stratagem.errors import ConfigError
from stratagem.evaluation.pools import POLICY, Evaluation
from stratagem.game import HasSolverTree
from stratagem.games import get_game
from stratagem.metrics.actions import action_rates
from stratagem.metrics.registry import game_metrics
from stratagem.metrics.sepo import SEPOGame, sepo_metrics
from stratagem.report.tables import write_action_rates, write_metrics
from stratagem.runs import TRACES, read_fingerprint, scan_traces, stored_inputs
from stratagem.solvers.best_response import exploitability
from stratagem.trace import read_traces

LEGACY_POLICY = "kuhn_policy.json"  # the name run folders of trace schema v1 used


def rebuild_metrics(run: Path) -> Evaluation:
    """Recomputes and rewrites ``metrics.csv`` / ``metrics.md`` of an ``eval`` run folder from
    its traces (and stored Kuhn policy, and copies of the files the game read); returns the
    evaluation they describe.

    Raises:
        ConfigError: the folder holds no traces, is not an ``eval`` folder, its game has no
            metrics to rebuild, or its traces are of another game than ``run.json`` names.
    """
    if not (run / TRACES).exists():
        raise ConfigError(f"{run} holds no {TRACES}; pass a run folder written by `stratagem eval`")
    fp = read_fingerprint(run)
    if fp.get("job", "eval") != "eval":
        raise ConfigError(
            f"{run} is a {fp.get('job')} folder; `report` rebuilds `stratagem eval` folders "
            "(a tournament writes its tables itself when rerun)"
        )
    scan_traces(run / TRACES)  # a bad line or a duplicate episode is an error, not a count
    # the files the game read, from the folder's own copies: wherever the report runs
    game = get_game(fp["game"], **{**fp.get("game_params", {}), **stored_inputs(run)})
    own = game_metrics(game.name)
    if not isinstance(game, SEPOGame) and own is None:
        raise ConfigError(
            f"{game.name} has no evaluation metrics to rebuild; its tables come from "
            f"`stratagem tournament --game {game.name}`"
        )
    normalise = fp.get("normalise", False)
    traces = read_traces(run / TRACES)
    other = next((t for t in traces if t.game != game.name), None)
    if other is not None:
        raise ConfigError(
            f"{run}/{TRACES} holds {other.game} episodes but run.json says {game.name}; "
            "the folder was mixed up"
        )
    if isinstance(game, SEPOGame):
        metrics = sepo_metrics(traces, game, normalise=normalise)
    else:
        assert own is not None
        metrics = own(traces)
    exact = policy = None
    stored = next((run / n for n in (POLICY, LEGACY_POLICY) if (run / n).exists()), None)
    if stored is not None and isinstance(game, HasSolverTree):
        policy = json.loads(stored.read_text())
        exact = exploitability(game.game_tree(), policy)
    write_metrics(run, metrics, exact, normalise)
    if isinstance(game, SEPOGame):
        write_action_rates(run, action_rates(traces))
    return Evaluation(
        game.name,
        fp["agent"],
        metrics,
        traces,
        exact,
        policy,
        normalise,
        out=run,
        episodes=len(traces),
    )
