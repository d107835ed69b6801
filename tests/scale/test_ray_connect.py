"""Ray failures that need no cluster: an unreachable ``--ray-address`` fails within the
``--ray-timeout`` in one line, and a run stopped by too many worker deaths is marked ``error``
in its ``run.json`` (and resumes)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from stratagem.cluster import RayWorkerError, connect
from stratagem.games import get_game
from stratagem.play import play
from stratagem.strategies import get_strategy
from stratagem.tournament import round_robin

pytest.importorskip("ray")
CLI = [sys.executable, "-m", "stratagem.cli.main"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_closed_port_fails_at_once_in_one_line(tmp_path):
    port = closed_port()
    start = time.monotonic()
    done = subprocess.run(
        [*CLI, "tournament", "--game", "ipd", "--agents", "TitForTat,AlwaysDefect",
         "--episodes", "2", "--ray-address", f"127.0.0.1:{port}", "--out", str(tmp_path / "rr")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert time.monotonic() - start < 30  # Ray alone retried such an address for 13.7 minutes
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: cannot reach the Ray cluster at 127.0.0.1:{port} (Connection refused, waited up "
        "to 10 s); check --ray-address, or allow longer with --ray-timeout"
    ]
    assert json.loads((tmp_path / "rr" / "run.json").read_text())["status"] == "error"


def test_an_address_that_never_answers_fails_after_the_timeout():
    # a listener that never accepts, its backlog full: the next connection gets no answer
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = []
        for _ in range(8):  # fill the accept queue (its length depends on the kernel)
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        time.sleep(0.2)
        start = time.monotonic()
        with pytest.raises(RayWorkerError, match=r"no answer, waited up to 1\.5 s"):
            connect(f"ray://127.0.0.1:{port}", timeout=1.5)
        assert 1.4 < time.monotonic() - start < 5
        for s in fillers:
            s.close()


def test_the_ray_timeout_must_be_a_positive_number(tmp_path):
    done = subprocess.run(
        [*CLI, "tournament", "--game", "ipd", "--agents", "TitForTat,AlwaysDefect",
         "--ray-timeout", "0", "--ray", "--out", str(tmp_path / "rr")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "ray_timeout" in done.stderr.replace("-", "_")
    assert "Traceback" not in done.stderr and not (tmp_path / "rr").exists()


def test_too_many_worker_deaths_mark_the_run_error_and_a_rerun_finishes_it(tmp_path):
    game = get_game("ipd")
    agents = {n: get_strategy("ipd", n) for n in ("TitForTat", "AlwaysDefect")}

    def dying_player(game, specs, **kwargs):  # what RayPlayer does past max_worker_deaths
        for i, trace in enumerate(play(game, specs, **kwargs)):
            if i == 3:
                raise RayWorkerError("Ray workers died 3 times (last: killed); finished ...")
            yield trace

    with pytest.raises(RayWorkerError):
        round_robin(game, agents, tmp_path, count=5, player=dying_player)
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert manifest["status"] == "error" and manifest["error"].startswith("RayWorkerError: ")
    assert len((tmp_path / "traces.jsonl").read_text().splitlines()) == 3
    result = round_robin(game, agents, tmp_path, count=5)
    assert result.episodes == 20 and json.loads((tmp_path / "run.json").read_text())["status"] == (
        "complete"
    )
