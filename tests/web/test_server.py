"""``stratagem serve`` as a process: loopback by default, its key file, and no finished game lost
when the server is killed (RELIABILITY I2, I8, I9)."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from .conftest import CONTEXT_LINES


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """``stratagem serve`` as a process on a free port, with a Deal or No Deal context file."""

    def __init__(
        self, tmp_path: Path, *extra: str, game: str = "dond", agent: str = "strategy:FairSplit"
    ):
        contexts = tmp_path / "contexts.txt"
        contexts.write_text(CONTEXT_LINES)
        self.db = tmp_path / "games.db"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != "STRATAGEM_SESSION_KEY"}
        cmd = [sys.executable, "-m", "stratagem.cli.main", "serve", "--game", game]
        cmd += ["--agent", agent, "--seat", "0", "--port", str(self.port), "--db", str(self.db)]
        cmd += [*(["--param", f"contexts={contexts}"] if game == "dond" else []), *extra]
        self.log = tmp_path / f"serve-{self.port}.log"
        self.proc = subprocess.Popen(
            cmd, stdout=self.log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=tmp_path
        )
        self.client = httpx2.Client(base_url=self.base, headers={"Origin": self.base})
        deadline = time.monotonic() + 90
        while True:
            try:
                if self.client.get("/api/session").status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start: {self.log.read_text()}")
            time.sleep(0.05)

    def settle(self, game_id: str) -> dict:
        for _ in range(3000):
            state = self.client.get(f"/api/games/{game_id}").json()
            if not state["thinking"]:
                return state
            time.sleep(0.01)
        raise AssertionError("the model kept thinking")

    def play_one(self) -> dict:
        """One full game: a message, then proposals until it ends."""
        state = self.client.post("/api/games").json()
        gid = state["game_id"]
        state = self.settle(gid)
        assert self.client.post(
            f"/api/games/{gid}/turn", json={"kind": "message", "text": "hello"}
        ).is_success
        state = self.settle(gid)
        while not state["over"]:
            r = self.client.post(
                f"/api/games/{gid}/turn",
                json={"kind": "propose", "books": 0, "hats": 2, "balls": 1},
            )
            assert r.status_code in (200, 409), r.text
            state = self.settle(gid)
        return state

    def stop(self, sig: int = signal.SIGKILL) -> int:
        self.client.close()
        self.proc.send_signal(sig)
        return self.proc.wait(60)


def rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT game_id, status FROM games ORDER BY id").fetchall()


def listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp* write them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append(address)
    return found


def test_i8_three_finished_games_survive_sigkill(tmp_path):
    server = Serve(tmp_path)
    try:
        finished = [server.play_one()["game_id"] for _ in range(3)]
        fourth = server.client.post("/api/games").json()["game_id"]  # live when the server dies
    finally:
        server.stop(signal.SIGKILL)
    assert rows(server.db) == [*((g, "finished") for g in finished), (fourth, "live")]
    again = Serve(tmp_path)
    try:
        assert again.client.get("/api/session").json()["live"] is None  # sessions are gone
        # the game the killed server left live is kept, as abandoned
        assert rows(again.db) == [*((g, "finished") for g in finished), (fourth, "abandoned")]
        again.play_one()
    finally:
        again.stop(signal.SIGKILL)
    assert len(rows(server.db)) == 5


def test_i8_sigterm_stores_the_live_game_as_abandoned(tmp_path):
    server = Serve(tmp_path)
    try:
        gid = server.client.post("/api/games").json()["game_id"]
    finally:
        code = server.stop(signal.SIGTERM)
    assert code in (0, -signal.SIGTERM, 143)  # uvicorn shuts down, then re-raises the signal
    assert rows(server.db) == [(gid, "abandoned")]


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp (Linux)")
def test_i9_default_start_listens_on_loopback_only_and_makes_a_0600_key(tmp_path):
    server = Serve(tmp_path)
    try:
        addresses = listening(server.port)
        assert addresses == ["0100007F"], addresses  # 127.0.0.1, nothing else
        key = Path(str(server.db) + ".key")
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        r = server.client.get("/api/session", headers={"Host": "evil.example"})
        assert r.status_code == 400  # DNS rebinding: only loopback names are served
        assert "server" not in r.headers
    finally:
        server.stop(signal.SIGKILL)


def test_serve_plays_a_game_without_a_board_of_its_own(tmp_path):
    server = Serve(tmp_path, game="auction", agent="strategy:Truthful")
    try:
        session = server.client.get("/api/session").json()
        assert (session["game"], session["board"]) == ("auction", "text")
        state = server.client.post("/api/games").json()
        gid = state["game_id"]
        while not state["over"]:
            body = {"action": state["legal"][0]}
            assert server.client.post(f"/api/games/{gid}/turn", json=body).status_code == 200
            state = server.settle(gid)
        assert state["outcome"]["rounds"] == 6
    finally:
        server.stop(signal.SIGKILL)
    assert rows(server.db) == [(gid, "finished")]
