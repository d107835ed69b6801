"""The games database and its export: ``stratagem report`` computes every metric of the game on
human-model games; the ``serve`` command's refusals are one line."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest
import typer
from typer.testing import CliRunner

from stratagem.cli.serve import serve_command
from stratagem.errors import ConfigError, StratagemError
from stratagem.report.rebuild import rebuild_metrics
from stratagem.runs import read_fingerprint, scan_traces
from stratagem.web.records import COLUMNS
from stratagem.web.storage import GameStore, export_run

from .test_api import dond_server, finish_dond


def _metrics(folder) -> dict[str, dict]:
    with open(folder / "metrics.csv") as f:
        return {row["metric"]: row for row in csv.DictReader(f)}


def _cli() -> typer.Typer:
    from stratagem.cli.options import register
    from stratagem.web.settings import ServeSettings

    app = typer.Typer()
    register(app, "serve", ServeSettings, serve_command)
    return app


def test_export_is_a_run_folder_that_report_reads(serve, dond_contexts, tmp_path):
    server = dond_server(serve, dond_contexts)
    for _ in range(3):
        finish_dond(server)
    server.new_game()  # a live game (stored as abandoned below) is not exported
    server.service.shutdown()
    out = tmp_path / "export"
    assert export_run(server.service.store, "dond", out) == 3
    assert len(scan_traces(out / "traces.jsonl")[0]) == 3
    fp = read_fingerprint(out)
    assert fp["job"] == "eval" and fp["game"] == "dond" and fp["agent_spec"] == "hf:scripted"
    rebuild_metrics(out)
    metrics = _metrics(out)
    assert metrics["score"]["n"] == "3" and float(metrics["score"]["value"]) == 8.0  # the model
    assert float(metrics["opponent_score"]["value"]) == 6.0  # the person
    assert float(metrics["agreement_rate"]["value"]) == 1.0
    assert float(metrics["pareto_rate"]["value"]) in (0.0, 1.0)
    assert export_run(server.service.store, "dond", out) == 3  # an earlier export is replaced


def test_export_through_the_command(serve, dond_contexts, tmp_path):
    server = dond_server(serve, dond_contexts)
    finish_dond(server)
    db = str(server.service.store.path)
    out = tmp_path / "cli-export"
    result = CliRunner().invoke(_cli(), ["--game", "dond", "--db", db, "--export", str(out)])
    assert result.exit_code == 0, result.output
    assert "exported 1 dond games" in result.output
    assert (out / "traces.jsonl").read_text().count("\n") == 1


def test_export_refusals(serve, dond_contexts, tmp_path):
    server = dond_server(serve, dond_contexts)
    store = server.service.store
    with pytest.raises(ConfigError, match="no finished dond game"):
        export_run(store, "dond", tmp_path / "a")
    finish_dond(server)
    with pytest.raises(ConfigError, match="no finished ipd game"):
        export_run(store, "ipd", tmp_path / "a")
    with pytest.raises(ConfigError, match="played by strategy:X"):
        export_run(store, "dond", tmp_path / "a", agent="strategy:X")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty"):
        export_run(store, "dond", busy)
    other = serve("dond", spec="strategy:FairSplit", params={"contexts": dond_contexts}, seat=0)
    other.service.store = store  # a second agent writing into the same database
    state = other.new_game()
    other.turn(state["game_id"], {"kind": "message", "text": "hi"})
    other.settle(state["game_id"])
    other.turn(state["game_id"], {"kind": "propose", "books": 0, "hats": 2, "balls": 1})
    other.settle(state["game_id"])
    while not other.settle(state["game_id"])["over"]:
        other.turn(state["game_id"], {"kind": "propose", "books": 0, "hats": 2, "balls": 1})
    with pytest.raises(ConfigError, match="several agents"):
        export_run(store, "dond", tmp_path / "b")
    assert export_run(store, "dond", tmp_path / "b", agent="strategy:FairSplit") == 1


def test_rows_are_complete_and_queries_parameterised(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    finish_dond(server)
    db = sqlite3.connect(server.service.store.path)
    db.row_factory = sqlite3.Row
    [row] = db.execute("SELECT * FROM games").fetchall()
    assert row["status"] == "finished" and row["human_seat"] == 0
    assert json.loads(row["game_params"])["contexts"] == dond_contexts
    assert json.loads(row["trace"])["episode_id"] == row["game_id"]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(sqlite3.IntegrityError):  # UNIQUE(game_id) holds in the schema itself
        columns = ", ".join(COLUMNS)
        db.execute(f"INSERT INTO games ({columns}) SELECT {columns} FROM games")


def test_a_bad_database_is_one_line(tmp_path):
    bad = tmp_path / "not.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="cannot open the games database"):
        GameStore(bad)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--game", "meeting", "--agent", "strategy:X"], "unknown game for the play page"),
        (["--game", "dond"], "--agent"),
        (["--agent", "strategy:FairSplit", "--temperature", "0.5"], "--temperature"),
        (["--agent", "strategy:FairSplit", "--host", "0.0.0.0"], "--allowed-host"),
        (["--export", "out", "--db", "missing.db"], "no such games database"),
        (["--agent", "strategy:FairSplit", "--seat", "2"], "seat"),
    ],
)
def test_serve_command_refusals(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code != 0
    assert isinstance(result.exception, StratagemError), result.output
    assert message in str(result.exception)
