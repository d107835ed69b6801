"""``stratagem serve`` as a process, for a study: a game killed mid-play with SIGKILL is kept as
``abandoned`` by the next server and a page left open over it is told so; the database and its
companions are readable by their owner only; one server per database; the operator's token."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from .test_server import Serve, rows


def test_a_game_live_at_sigkill_is_kept_as_abandoned(tmp_path):
    server = Serve(tmp_path)
    try:
        finished = server.play_one()["game_id"]
        gid = server.client.post("/api/games").json()["game_id"]
        server.settle(gid)
        r = server.client.post(f"/api/games/{gid}/turn", json={"kind": "message", "text": "brb"})
        assert r.status_code == 200
        server.settle(gid)
        assert rows(server.db) == [(finished, "finished"), (gid, "live")]  # while it plays
        cookies = dict(server.client.cookies)
    finally:
        server.stop(signal.SIGKILL)
    assert rows(server.db) == [(finished, "finished"), (gid, "live")]
    again = Serve(tmp_path)
    try:
        assert rows(again.db) == [(finished, "finished"), (gid, "abandoned")]
        with sqlite3.connect(again.db) as db:
            trace, view = db.execute(
                "SELECT trace, human_view FROM games WHERE game_id = ?", (gid,)
            ).fetchone()
        trace = json.loads(trace)
        assert (trace["status"], trace["error"]) == ("error", "abandoned")
        assert "brb" in json.dumps(trace) and "brb" in view  # its moves up to the kill
        # the page left open over the game polls it with its old cookie: it is told
        again.client.cookies.update(cookies)
        r = again.client.get(f"/api/games/{gid}")
        assert r.status_code == 404
        assert r.json()["gone"] is True and r.json()["status"] == "abandoned"
    finally:
        again.stop(signal.SIGKILL)
    out = tmp_path / "export"
    export = [sys.executable, "-m", "stratagem.cli.main", "serve", "--db", str(server.db)]
    result = subprocess.run([*export, "--export", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    games = [json.loads(x) for x in (out / "games.jsonl").read_text().splitlines()]
    assert [(g["game_id"], g["status"]) for g in games] == [
        (finished, "finished"),
        (gid, "abandoned"),
    ]


def test_the_database_files_are_the_owners_and_one_server_uses_them(tmp_path):
    server = Serve(tmp_path)
    try:
        server.play_one()
        for name in ("games.db", "games.db-wal", "games.db-shm", "games.db.key"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
        for name in ("games.db.lock", "games.db.operator"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
        env = {k: v for k, v in os.environ.items() if k != "STRATAGEM_SESSION_KEY"}
        second = subprocess.run(
            [sys.executable, "-m", "stratagem.cli.main", "serve", "--agent", "strategy:FairSplit",
             "--db", str(server.db), "--port", "0"],
            capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
        )  # fmt: skip
        assert second.returncode != 0
        assert f"{server.db} is in use by pid {server.proc.pid}" in second.stdout + second.stderr
        assert "Traceback" not in second.stdout + second.stderr
        token = (tmp_path / "games.db.operator").read_text().strip()
        assert server.client.get("/operator").status_code == 403
        page = server.client.get("/operator", headers={"Authorization": f"Bearer {token}"})
        assert page.status_code == 200 and "<td>strategy:FairSplit</td>" in page.text
        assert "operator's summary: /operator" in Path(server.log).read_text()
    finally:
        server.stop(signal.SIGKILL)
