"""Ctrl-C and SIGTERM stop a run within seconds whatever the endpoint does, and nothing is sent
after them (RELIABILITY A5, A5b): real CLI subprocesses against a real server on 127.0.0.1 that
accepts every request and never answers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.backends.fault_server import FaultServer

CLI = [sys.executable, "-m", "stratagem.cli.main"]


def start(args: list[str], env_cache: Path) -> subprocess.Popen:
    import os

    env = {**os.environ, "STRATAGEM_CACHE": str(env_cache)}
    return subprocess.Popen(
        [*CLI, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # a suite started in the background inherits SIGINT ignored; a user's terminal does not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def stop(proc: subprocess.Popen, sig: int) -> tuple[float, str]:
    """Send ``sig``; returns (seconds until the process ended, its stderr). A process still
    running after 10 s is killed (and the test fails on the time)."""
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return time.monotonic() - sent, err


def wait_until(check, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not check():
        time.sleep(0.02)
    assert check(), "timed out waiting"


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_run_whose_endpoint_never_answers_and_nothing_is_sent_after_it(
    tmp_path, sig, code
):
    out = tmp_path / "run"
    with FaultServer([("sleep", 600)]) as server:
        args = ["eval", "--game", "ipd", "--agent", "openai:m", "--base-url", server.url,
                "--attempt-timeout", "2", "--episodes", "2", "--out", str(out)]  # fmt: skip
        proc = start(args, tmp_path / "cache")
        wait_until(lambda: len(server.requests) >= 8)  # every worker waits on the server
        time.sleep(0.3)
        signalled = time.monotonic()
        took, err = stop(proc, sig)
        time.sleep(2.5)  # an attempt timeout: a request retried after the signal would be here
        after = [t for t in server.arrivals if t > signalled]
    assert after == [], f"{len(after)} requests were sent after the signal"
    assert took < 5, f"the process took {took:.1f} s to stop"
    assert proc.returncode == code
    lines = err.strip().splitlines()
    assert lines == [
        "interrupted; every finished episode is saved. Resume with: stratagem " + " ".join(args)
    ]
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


@pytest.mark.parametrize(
    "args",
    [
        ["solve", "--game", "leduc", "--iterations", "100000"],
        ["psro", "--game", "kuhn", "--iterations", "1000", "--episodes", "5000"],
    ],
)
def test_sigterm_stops_solve_and_psro_with_a_message_and_exit_143(tmp_path, args):
    out = tmp_path / "run"
    args = [*args, "--out", str(out)]
    proc = start(args, tmp_path / "cache")
    wait_until(lambda: (out / "config.json").exists())  # the command itself is running
    time.sleep(0.5)
    took, err = stop(proc, signal.SIGTERM)
    assert took < 5 and proc.returncode == 143
    assert err.strip().splitlines() == [
        "interrupted; results are written at the end; model answers so far stay in the cache. "
        "Resume with: stratagem " + " ".join(args)
    ]


def test_an_interrupted_trainer_says_its_checkpoints_are_kept(capsys, monkeypatch):
    import typer

    from stratagem.cli.main import trained

    def command(out: str = "runs/x"):
        raise KeyboardInterrupt

    monkeypatch.setattr("sys.argv", ["stratagem", "train", "sft", "--out", "runs/x"])
    with pytest.raises(typer.Exit) as stopped:
        trained(command)(out="runs/x")
    assert stopped.value.exit_code == 130
    err = capsys.readouterr().err
    assert err.startswith(
        "interrupted; every finished checkpoint is kept. Resume with: stratagem train sft"
    )
