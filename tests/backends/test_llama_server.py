"""The openai backend against a real OpenAI-compatible server: llama.cpp serving the embedded
GGUF on 127.0.0.1 (slow; ``make test`` installs llama-cpp-python[server])."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, port: int):
        from stratagem.backends.embedded import gguf_path

        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self.cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf_path()),
            "--chat_format",
            "chatml",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            "--logits_all",
            "true",
        ]
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.url + "/models", timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("llama.cpp server exited at start") from None
                time.sleep(0.3)
        raise RuntimeError("llama.cpp server did not come up in 120 s")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


@pytest.fixture(scope="module")
def llama():
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        if os.environ.get("STRATAGEM_REQUIRE_LLAMA") == "1":
            raise
        pytest.skip("llama-cpp-python[server] is not installed (make test installs it)")
    server = LlamaServer(_free_port())
    server.start()
    yield server
    server.kill()


def eval_cmd(url: str, out: Path, episodes: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "stratagem.cli.main",
        "eval",
        "--game",
        "ipd",
        "--agent",
        "openai:smollm2",
        "--base-url",
        url,
        "--episodes",
        str(episodes),
        "--max-new-tokens",
        "12",
        "--out",
        str(out),
        "--concurrency",
        "2",
        "--max-retries",
        "8",
        "--attempt-timeout",
        "30",
    ]


def test_eval_through_a_real_server_prints_the_full_table(llama, tmp_path):
    env = {**os.environ, "STRATAGEM_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        eval_cmd(llama.url, tmp_path / "run", 1),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    for label in (
        "Pay per round (u, train pool)",
        "Exploit (e, exploit pool)",
        "Collusion (c, collusive pool)",
        "Externality (x, train pool)",
        "Pay per round (robust pool)",
        "Safety J",
        "NRA",
        "Parse-failure rate",
        "Fallback rate",
    ):
        assert label in result.stdout
    lines = (tmp_path / "run/traces.jsonl").read_text().splitlines()
    assert len(lines) == 11
    decisions = [d for line in lines for d in json.loads(line)["decisions"] if d["seat"] == 0]
    assert all(d["text"] is not None for d in decisions)


def test_logprobs_from_the_real_server_give_a_distribution(llama):
    from stratagem.backends.openai import OpenAIBackend

    backend = OpenAIBackend("smollm2", llama.url)
    chat = [
        {"role": "system", "content": "Answer with COOPERATE or DEFECT."},
        {"role": "user", "content": "Your move?"},
    ]
    probs = backend.choice_probs([chat], [("COOPERATE", "DEFECT")])[0]
    assert set(probs) == {"COOPERATE", "DEFECT"} and sum(probs.values()) == pytest.approx(1.0)


def test_server_killed_mid_run_and_restarted_finishes_every_episode_once(tmp_path):
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        if os.environ.get("STRATAGEM_REQUIRE_LLAMA") == "1":
            raise
        pytest.skip("llama-cpp-python[server] is not installed")
    server = LlamaServer(_free_port())
    server.start()
    env = {**os.environ, "STRATAGEM_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "run"
    traces = out / "traces.jsonl"
    run = subprocess.Popen(
        eval_cmd(server.url, out, 1), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    try:
        deadline = time.time() + 300
        while time.time() < deadline and not (traces.exists() and traces.read_text().count("\n")):
            time.sleep(0.2)
        server.kill()  # mid-run: requests now fail and are retried with backoff
        time.sleep(2)
        server.start()
        # exit 1 when some episodes ran out of retries while the server was down (A9): they are
        # recorded as errors, and a rerun retries them
        assert run.wait(timeout=600) in (0, 1), run.stderr.read().decode()[-2000:]
        for _ in range(2):
            records = [json.loads(x) for x in traces.read_text().splitlines()]
            if all(r["status"] == "complete" for r in records):
                break
            subprocess.run(eval_cmd(server.url, out, 1), env=env, timeout=600, capture_output=True)
    finally:
        run.kill()
        server.kill()
    records = [json.loads(x) for x in traces.read_text().splitlines()]
    ids = [r["episode_id"] for r in records]
    assert len(ids) == len(set(ids)) == 11  # one episode per opponent, each exactly once
    assert all(r["status"] == "complete" for r in records)
