"""The played games, in SQLite, and their export as a run folder (SPEC §7; RELIABILITY I8).

Every finished or abandoned game is one row, written in one transaction: the game and its
parameters, the agent spec, both seats, scores, timestamps, both views (what the person saw: their
system turn and the final screen; what the model saw: its whole chat) and the episode's trace.
``game_id`` is ``UNIQUE`` and a second write of the same game is a no-op, so a game is never
stored twice; every query is parameterised, so a message such as ``'); DROP TABLE games;--``
is stored verbatim. The database runs in WAL mode with ``synchronous=FULL``: a row whose commit
returned survives a killed server.

``export_run`` writes the finished games of one game (and agent) as a run folder — ``traces.jsonl``
and a ``run.json`` whose fingerprint says ``job: eval`` — so ``stratagem report FOLDER`` computes
every metric of the game on human-model games (the model is the evaluated seat: ``meta.seat``).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from stratagem.errors import ConfigError
from stratagem.trace import Trace, dumps

SCHEMA = """
CREATE TABLE IF NOT EXISTS games (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    game_id TEXT NOT NULL UNIQUE,
    game TEXT NOT NULL,
    game_version INTEGER NOT NULL,
    game_params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('finished', 'abandoned')),
    agent_spec TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    human_seat INTEGER NOT NULL CHECK (human_seat IN (0, 1)),
    human_score REAL,
    model_score REAL,
    started TEXT NOT NULL,
    ended TEXT NOT NULL,
    human_view TEXT NOT NULL,
    model_view TEXT NOT NULL,
    trace TEXT NOT NULL
)
"""
Status = Literal["finished", "abandoned"]


@dataclass(frozen=True)
class GameRecord:
    """One stored game."""

    game_id: str
    game: str
    game_version: int
    game_params: Mapping[str, Any]
    status: Status
    agent_spec: str
    agent_name: str
    human_seat: int
    human_score: float | None
    model_score: float | None
    started: str  # ISO 8601, UTC
    ended: str
    human_view: Mapping[str, Any]  # the person's system turn and final screen
    model_view: Mapping[str, Any]  # the model's system turn and chat
    trace: Trace

    def row(self) -> tuple:
        """Returns the values of the ``games`` columns after ``id``, in order."""
        return (
            self.game_id,
            self.game,
            self.game_version,
            dumps(dict(self.game_params)),
            self.status,
            self.agent_spec,
            self.agent_name,
            self.human_seat,
            self.human_score,
            self.model_score,
            self.started,
            self.ended,
            dumps(dict(self.human_view)),
            dumps(dict(self.model_view)),
            self.trace.to_json(),
        )

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> GameRecord:
        """Returns the record a ``SELECT *`` row holds."""
        return cls(
            game_id=row["game_id"],
            game=row["game"],
            game_version=row["game_version"],
            game_params=json.loads(row["game_params"]),
            status=row["status"],
            agent_spec=row["agent_spec"],
            agent_name=row["agent_name"],
            human_seat=row["human_seat"],
            human_score=row["human_score"],
            model_score=row["model_score"],
            started=row["started"],
            ended=row["ended"],
            human_view=json.loads(row["human_view"]),
            model_view=json.loads(row["model_view"]),
            trace=Trace.from_json(row["trace"]),
        )


_COLUMNS = (
    "game_id, game, game_version, game_params, status, agent_spec, agent_name, human_seat, "
    "human_score, model_score, started, ended, human_view, model_view, trace"
)


class GameStore:
    """The SQLite file of played games; safe to share between threads."""

    def __init__(self, path: str | Path):
        """Opens (or creates) the database at ``path``.

        Raises:
            ConfigError: the file cannot be opened or is not a games database.
        """
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open the games database {self.path}: {exc}") from None

    def save(self, record: GameRecord) -> bool:
        """Stores ``record`` in one transaction; returns False (and changes nothing) when its
        ``game_id`` is already stored."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cursor = self._db.execute(
                    f"INSERT INTO games ({_COLUMNS}) VALUES ({', '.join('?' * 15)}) "
                    "ON CONFLICT (game_id) DO NOTHING",
                    record.row(),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return cursor.rowcount == 1

    def records(self, game: str | None = None, status: Status | None = None) -> list[GameRecord]:
        """Returns the stored games (of ``game``, with ``status``, when given), oldest first."""
        query, args = "SELECT * FROM games", []
        where = []
        if game is not None:
            where.append("game = ?")
            args.append(game)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        if where:
            query += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id", args).fetchall()
        return [GameRecord.from_row(r) for r in rows]

    def count(self) -> int:
        """Returns how many games are stored."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM games").fetchone()[0]

    def close(self) -> None:
        """Closes the database."""
        with self._lock:
            self._db.close()


def now_iso(seconds: float | None = None) -> str:
    """Returns a timestamp (``seconds`` since the epoch, or now) in ISO 8601, UTC."""
    if seconds is None:
        return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")


def export_run(store: GameStore, game: str, folder: str | Path, agent: str | None = None) -> int:
    """Writes the finished games of ``game`` (played by agent spec ``agent``, when given) as a run
    folder that ``stratagem report`` reads; returns how many were written.

    Raises:
        ConfigError: no finished game matches; the games were played by several agents or with
            several game parameter sets (pass ``agent``, or export from separate databases); the
            folder holds something other than an earlier export.
    """
    from stratagem.runs import MANIFEST, TRACES, check_out_path

    records = [r for r in store.records(game, "finished") if agent in (None, r.agent_spec)]
    if not records:
        which = f" played by {agent}" if agent else ""
        raise ConfigError(f"{store.path} holds no finished {game} game{which} to export")
    specs = sorted({r.agent_spec for r in records})
    if len(specs) > 1:
        raise ConfigError(
            f"{store.path} holds {game} games of several agents ({', '.join(specs)}); "
            "choose one with --agent"
        )
    params = {dumps(dict(r.game_params)) for r in records}
    if len(params) > 1:
        raise ConfigError(
            f"{store.path} holds {game} games with different game parameters; a run folder "
            "has one set: export them from separate databases"
        )
    out = check_out_path(folder)
    manifest = out / MANIFEST
    if out.exists() and any(out.iterdir()):
        try:
            earlier = json.loads(manifest.read_text(encoding="utf-8"))["fingerprint"]["source"]
        except (OSError, ValueError, KeyError, TypeError):
            earlier = None
        if earlier != "serve":
            raise ConfigError(f"{out} is not empty; export into a new folder")
    out.mkdir(parents=True, exist_ok=True)
    first = records[0]
    fingerprint = {
        "job": "eval",
        "source": "serve",
        "game": game,
        "game_version": first.game_version,
        "game_params": dict(first.game_params),
        "agent": first.agent_name,
        "agent_spec": first.agent_spec,
        "normalise": False,
    }
    tmp = out / (TRACES + ".tmp")
    tmp.write_text("".join(r.trace.to_json() + "\n" for r in records), encoding="utf-8")
    tmp.replace(out / TRACES)
    manifest.write_text(
        json.dumps(
            {
                "fingerprint": fingerprint,
                "status": "complete",
                "episodes": len(records),
                "exported": now_iso(),
                "database": str(store.path),
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    return len(records)
