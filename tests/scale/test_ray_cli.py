"""``--ray`` as a user runs it: real CLI processes, each starting its own local Ray cluster.

A driver killed with SIGKILL mid-run and rerun writes every episode once, and the traces equal a
local run's byte for byte (timing fields dropped) (SPEC §10, RELIABILITY A1, A8).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.scale.canonical import canonical, ids

pytest.importorskip("ray")

CLI = [sys.executable, "-m", "stratagem.cli.main"]
AGENTS = "Boulware,Linear,Conceder,TitForTatConcession"


def tournament(out: Path, *extra: str) -> list[str]:
    return [*CLI, "tournament", "--game", "bargaining", "--agents", AGENTS,
            "--gft", "60", "--ngft", "30", "--out", str(out), *extra]  # fmt: skip


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_sigkill_of_the_driver_then_a_rerun_writes_every_episode_once(tmp_path):
    out = tmp_path / "ray"
    traces = out / "traces.jsonl"
    # its own session: the driver's Ray processes share its process group, so the test can
    # clean up what Ray leaves after a SIGKILL (its node agents exit on their own, later)
    driver = subprocess.Popen(
        tournament(out, "--ray", "--workers", "2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 90
    while time.time() < deadline and driver.poll() is None and lines(traces) < 200:
        time.sleep(0.05)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(driver.pid, signal.SIGKILL)
    written = lines(traces)
    assert 0 < written < 16 * 90, "the driver was killed mid-run"

    again = subprocess.run(
        tournament(out, "--ray", "--workers", "2"), capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    found = ids(out)
    assert len(found) == len(set(found)) == 16 * 90

    local = tmp_path / "local"
    subprocess.run(tournament(local), check=True, capture_output=True, timeout=300)
    assert canonical(out) == canonical(local)
    for table in ("summary.csv", "profiles.csv", "ranking.csv"):
        assert (out / table).read_bytes() == (local / table).read_bytes(), table


def test_eval_with_ray_equals_the_local_eval(tmp_path):
    def evaluate(out: Path, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                *CLI,
                "eval",
                "--game",
                "ipd",
                "--agent",
                "strategy:Mixed",
                "--episodes",
                "10",
                "--seed",
                "7",
                "--out",
                str(out),
                *extra,
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=300,
        )

    remote = evaluate(tmp_path / "ray", "--ray", "--workers", "2")
    assert remote.returncode == 0, remote.stderr
    local = evaluate(tmp_path / "local")
    assert local.returncode == 0, local.stderr
    assert canonical(tmp_path / "ray") == canonical(tmp_path / "local")
    assert (tmp_path / "ray" / "metrics.csv").read_bytes() == (
        tmp_path / "local" / "metrics.csv"
    ).read_bytes()


def same_up_to_probs(mine: list[str], theirs: list[str], tolerance: float = 1e-4) -> bool:
    """Whether canonical lines are equal, decision probabilities within ``tolerance``: they come
    from the model's logits, whose last bits depend on the batch's shape (RELIABILITY D4);
    texts, actions and payoffs must be identical."""
    if len(mine) != len(theirs):
        return False
    for a, b in zip(mine, theirs, strict=True):
        a, b = json.loads(a), json.loads(b)
        pa = [d.pop("probs", None) or {} for d in a["decisions"]]
        pb = [d.pop("probs", None) or {} for d in b["decisions"]]
        if a != b or [sorted(x) for x in pa] != [sorted(x) for x in pb]:
            return False
        if any(abs(x[k] - y[k]) > tolerance for x, y in zip(pa, pb, strict=True) for k in x):
            return False
    return True


@pytest.mark.slow
def test_an_embedded_model_eval_with_two_ray_workers_equals_the_local_run(tmp_path):
    """Sampled decisions (temperature 1) of the embedded SmolLM2 on Kuhn poker, in fp32: the
    texts, actions and payoffs of every episode are the same played locally in one batch or on
    two Ray workers in chunks, because each decision samples with its own seed."""
    config = tmp_path / "eval.yaml"
    config.write_text("dtype: float32\n")
    # one torch thread, as each Ray worker has: the same arithmetic, and no OpenMP threads
    # spinning against each other on a busy 2-core machine
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def evaluate(out: Path, *extra: str) -> subprocess.CompletedProcess:
        args = ["eval", "--game", "kuhn", "--agent", "hf", "--episodes", "1"]
        args += ["--temperature", "1", "--max-new-tokens", "16", "--config", str(config)]
        return subprocess.run(
            [*CLI, *args, "--out", str(out), *extra],
            capture_output=True,
            text=True,
            timeout=1200,
            env=env,
        )

    local = evaluate(tmp_path / "local")
    assert local.returncode == 0, local.stderr
    remote = evaluate(tmp_path / "ray", "--ray", "--workers", "2")
    assert remote.returncode == 0, remote.stderr
    mine, theirs = canonical(tmp_path / "local"), canonical(tmp_path / "ray")
    assert len(mine) == 7 and same_up_to_probs(mine, theirs)  # one episode per opponent
    texts = [d["text"] for x in mine for d in json.loads(x)["decisions"] if d["text"]]
    assert len(set(texts)) > 1  # really sampled
