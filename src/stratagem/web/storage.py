"""The played games, in SQLite (SPEC §7; RELIABILITY I8).

Every game is one row from the moment it starts: written ``live`` when it starts, rewritten as
it goes (after every move), and rewritten a last time as ``finished`` or ``abandoned``; a
server that was killed leaves ``live`` rows, which the next server on the file marks
``abandoned`` when it starts (``abandon_live``). A row holds the game and its parameters, the
agent spec and the full configuration it was played with (``configuration``: the agent's
settings, content hashes of its weights and adapters, and the server's own settings;
``config_id`` names it), the participant id when the study asks for one and the consent that
participant gave (the accepted text's sha256 and when), both seats, scores,
timestamps, both views (what the person saw: their system turn and the latest screen; what the
model saw: its whole chat) and the episode's trace.

``game_id`` is ``UNIQUE`` and a row that is ``finished`` or ``abandoned`` is never written
again, so a game is never stored twice; every query is parameterised, so a message such as
``'); DROP TABLE games;--`` is stored verbatim. The database runs in WAL mode with
``synchronous=FULL`` (a row whose commit returned survives a killed server), and the file is
created readable by its owner only (0600): it holds everything people typed.

``export.py`` writes the games of one configuration as a run folder (``export_run``, importable
from here too).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fcntl
import json
import os
import sqlite3
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stratagem.errors import ConfigError
from stratagem.trace import Trace, dumps
from stratagem.web.export import export_run
from stratagem.web.records import COLUMNS, GameRecord, Status, configuration_id

__all__ = ["GameRecord", "GameStore", "Status", "export_run", "now_iso"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS games (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    game_id TEXT NOT NULL UNIQUE,
    game TEXT NOT NULL,
    game_version INTEGER NOT NULL,
    game_params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('live', 'finished', 'abandoned')),
    agent_spec TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    human_seat INTEGER NOT NULL CHECK (human_seat IN (0, 1)),
    human_score REAL,
    model_score REAL,
    started TEXT NOT NULL,
    ended TEXT NOT NULL,
    human_view TEXT NOT NULL,
    model_view TEXT NOT NULL,
    trace TEXT NOT NULL,
    config_id TEXT NOT NULL,
    configuration TEXT NOT NULL,
    participant TEXT,
    consent TEXT
)
"""
# PRAGMA user_version; 1 (or 0): no live rows, no configuration columns; 2: no consent column
SCHEMA_VERSION = 3


_INSERT = (
    f"INSERT INTO games ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
    "ON CONFLICT (game_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])
    + " WHERE games.status = 'live'"
)


class GameStore:
    """The SQLite file of played games; safe to share between threads."""

    def __init__(self, path: str | Path):
        """Opens (or creates, mode 0600) the database at ``path``, upgrading an older file.

        Raises:
            ConfigError: the file cannot be opened or is not a games database.
        """
        self.path = Path(path)
        self._lock = threading.Lock()
        self._claim: int | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _owner_only(self.path)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._upgrade()
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot open the games database {self.path}: {exc}") from None

    def _upgrade(self) -> None:
        """Creates the table, adds the ``consent`` column to a version-2 one (its rows hold no
        consent record), or rebuilds a version-1 one (no ``live`` status, no configuration
        columns) with its rows kept; each old row's configuration is its agent spec."""
        old = {r["name"] for r in self._db.execute("PRAGMA table_info(games)")}
        if not old or "config_id" in old:
            self._db.execute(SCHEMA)
            if old and "consent" not in old:
                self._db.execute("ALTER TABLE games ADD COLUMN consent TEXT")
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("ALTER TABLE games RENAME TO games_v1")
                self._db.execute(SCHEMA)
                for row in self._db.execute("SELECT * FROM games_v1 ORDER BY id").fetchall():
                    values = {k: row[k] for k in row.keys() if k != "id"}
                    agent = {"spec": values["agent_spec"]}
                    params = json.loads(values["game_params"])
                    values["configuration"] = dumps({"agent": agent})
                    values["config_id"] = configuration_id(
                        values["game"], values["game_version"], params, agent
                    )
                    values["participant"] = values["consent"] = None
                    self._db.execute(
                        f"INSERT INTO games ({', '.join(COLUMNS)}) "
                        f"VALUES ({', '.join('?' * len(COLUMNS))})",
                        [values[c] for c in COLUMNS],
                    )
                self._db.execute("DROP TABLE games_v1")
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def claim(self) -> None:
        """Takes this database for one serving process (an exclusive lock on ``DB.lock``, held
        until ``close`` or the process ends), so that ``abandon_live`` never ends the games of
        another server that is still running.

        Raises:
            ConfigError: another process serves from this database.
        """
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot create the lock file {lock}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise ConfigError(
                f"{self.path} is in use by {holder}; give this server its own --db"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        self._claim = fd

    def save(self, record: GameRecord) -> bool:
        """Writes ``record`` in one transaction: a new row, or over the game's ``live`` row;
        returns False (and changes nothing) when the game is stored as ended already."""
        return self._upsert(record)

    def track(self, record: GameRecord) -> bool:
        """Writes the ``live`` row of a game in play, like ``save`` (a separate name, so that
        the progress writes and the final one can be told apart)."""
        return self._upsert(record)

    def _upsert(self, record: GameRecord) -> bool:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cursor = self._db.execute(_INSERT, record.row())
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return cursor.rowcount == 1

    def abandon_live(self) -> int:
        """Marks every ``live`` row ``abandoned`` (its trace ends as ``error: abandoned``):
        the games a killed server left; returns how many. Call only with the database claimed."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                rows = self._db.execute(
                    "SELECT game_id, trace FROM games WHERE status = 'live'"
                ).fetchall()
                for row in rows:
                    trace = Trace.from_json(row["trace"])
                    ended = dataclasses.replace(trace, status="error", error="abandoned")
                    self._db.execute(
                        "UPDATE games SET status = 'abandoned', trace = ? "
                        "WHERE game_id = ? AND status = 'live'",
                        (ended.to_json(), row["game_id"]),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return len(rows)

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

    def status(self, game_id: str) -> Status | None:
        """Returns the stored status of ``game_id``, or None when it has no row."""
        with self._lock:
            row = self._db.execute(
                "SELECT status FROM games WHERE game_id = ?", (game_id,)
            ).fetchone()
        return None if row is None else row["status"]

    def count(self) -> int:
        """Returns how many games are stored as ended (finished or abandoned): a ``live`` row
        is a game's progress, not yet a result."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM games WHERE status != 'live'").fetchone()[
                0
            ]

    def tally(
        self,
        game: str,
        participant: str | None = None,
        game_ids: Sequence[str] = (),
        config_id: str | None = None,
    ) -> dict[str, Any]:
        """Returns the games of one participant (or, without one, the games ``game_ids``) of
        ``game`` played with configuration ``config_id`` (any, when None): ``finished`` and
        ``abandoned`` counts, the person's ``total`` score over the finished ones, and the
        ``last`` ended game (its status and both scores) or None. A study's page passes its own
        configuration, so the total a participant sees is the one exports and the operator's
        summary count (and payments may follow)."""
        if participant is not None:
            where, args = "participant = ?", [participant]
        else:
            where, args = f"game_id IN ({', '.join('?' * len(game_ids))})", list(game_ids)
        if config_id is not None:
            where, args = f"{where} AND config_id = ?", [*args, config_id]
        query = (
            "SELECT game_id, status, human_score, model_score FROM games "
            f"WHERE game = ? AND status != 'live' AND {where} ORDER BY id"
        )
        with self._lock:
            rows = self._db.execute(query, [game, *args]).fetchall()
        finished = [r for r in rows if r["status"] == "finished"]
        last = rows[-1] if rows else None
        return {
            "finished": len(finished),
            "abandoned": len(rows) - len(finished),
            "total": sum(r["human_score"] or 0.0 for r in finished),
            "last": None
            if last is None
            else {
                "game_id": last["game_id"],
                "status": last["status"],
                "your_score": last["human_score"],
                "model_score": last["model_score"],
            },
        }

    def summary(self) -> list[dict[str, Any]]:
        """Returns one entry per configuration (oldest first): its id, game, agent spec and
        agent settings, the games by status, the completion rate (finished over ended games),
        the participants, and the mean scores of the finished games."""
        query = (
            "SELECT config_id, game, agent_spec, MIN(configuration) AS configuration, "
            "COUNT(*) AS games, SUM(status = 'finished') AS finished, "
            "SUM(status = 'abandoned') AS abandoned, SUM(status = 'live') AS live, "
            "COUNT(DISTINCT participant) AS participants, "
            "AVG(CASE WHEN status = 'finished' THEN human_score END) AS human_mean, "
            "AVG(CASE WHEN status = 'finished' THEN model_score END) AS model_mean "
            "FROM games GROUP BY config_id, game, agent_spec ORDER BY MIN(id)"
        )
        with self._lock:
            rows = self._db.execute(query).fetchall()
        out = []
        for r in rows:
            entry = {k: r[k] for k in r.keys() if k != "configuration"}
            entry["agent"] = json.loads(r["configuration"]).get("agent", {})
            ended = r["finished"] + r["abandoned"]
            entry["completion_rate"] = r["finished"] / ended if ended else None
            out.append(entry)
        return out

    def close(self) -> None:
        """Closes the database (and gives up a claim on it)."""
        with self._lock:
            self._db.close()
            if self._claim is not None:
                os.close(self._claim)
                self._claim = None


def _owner_only(path: Path) -> None:
    """Creates ``path`` empty with mode 0600 when it does not exist, and takes group and other
    permissions off an existing file (SQLite gives its WAL files the database's mode)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077 and path.is_file():
            os.chmod(path, mode & 0o700)


def now_iso(seconds: float | None = None) -> str:
    """Returns a timestamp (``seconds`` since the epoch, or now) in ISO 8601, UTC."""
    if seconds is None:
        return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")
