"""Every user mistake and filesystem error is one line, not a traceback (RELIABILITY J1b, A9).

Table-driven: each bad input gives its exit code (2 for usage errors, 1 for runtime failures),
one line on stderr naming the problem, no ``Traceback``, and leaves any run folder unchanged.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "stratagem.cli.main"]
EVAL = ["eval", "--game", "ipd", "--agent", "strategy:TitForTat", "--episodes", "1"]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def make_tournament(root: Path) -> Path:
    out = root / "tournament"
    r = run(["tournament", "--game", "ipd", "--agents", "TitForTat,AlwaysDefect", "-n", "2",
             "--out", str(out)], root)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return out


def make_eval(root: Path, game: str = "ipd", name: str = "eval") -> Path:
    out = root / name
    agent = "strategy:TitForTat" if game == "ipd" else "strategy:NashApprox"
    r = run(["eval", "--game", game, "--agent", agent, "-n", "1", "--out", str(out)], root)
    assert r.returncode == 0, r.stderr
    return out


def traces_without_manifest(root: Path) -> Path:
    out = make_eval(root, name="orphan")
    (out / "run.json").unlink()
    return out


def mixed_up(root: Path) -> Path:
    kuhn, ipd = make_eval(root, "kuhn", "kuhn"), make_eval(root, "ipd", "ipd")
    shutil.copy(ipd / "traces.jsonl", kuhn / "traces.jsonl")
    return kuhn


def setup_file(root: Path) -> Path:
    (root / "a_file").write_text("x")
    return root / "a_file"


def non_utf8_config(root: Path) -> Path:
    path = root / "bad.yaml"
    path.write_bytes(b"game: ipd\nagent: \xff\xfe\n")
    return path


def config(root: Path, text: str) -> Path:
    path = root / "c.yaml"
    path.write_text(text)
    return path


def huge_contexts(root: Path) -> Path:
    """A DoND context file whose numbers run to 4,000 digits (and one past the int limit)."""
    big = "9" * 4000
    views = [f"1 {big} 2 0 2 5", "1 0 2 0 2 5", f"{big} 4 2 3 2 0", "1 4 2 3 2 0",
             "1 " + "9" * 4300 + " 2 3 2 0", "7 " + "9" * 4300 + " 2 3 2 0"]  # fmt: skip
    path = root / "contexts.txt"
    path.write_text("\n".join(views) + "\n")
    return path


TRAIN_LR = ["--learning-rate"]


# (case id, args built from the temp folder, exit code, words the one line must hold)
CASES = [
    ("out is a file", lambda r: [*EVAL, "--out", str(setup_file(r))], 2, "is a file"),
    ("out under a file", lambda r: [*EVAL, "--out", str(setup_file(r) / "x")], 2, "is a file"),
    ("out is /dev/null", lambda r: [*EVAL, "--out", "/dev/null"], 2, "not a folder"),
    ("out is empty", lambda r: [*EVAL, "--out", ""], 2, "--out is empty"),
    ("config not utf-8", lambda r: [*EVAL, "--config", str(non_utf8_config(r))], 2, "UTF-8"),
    ("config is a folder", lambda r: [*EVAL, "--config", str(r)], 2, "not a file"),
    ("adapter with a strategy", lambda r: [*EVAL, "--adapter", "x"], 2, "--adapter"),
    ("temperature with a strategy", lambda r: [*EVAL, "--temperature", "0.7"], 2, "LLM agents"),
    (
        "base url with a strategy",
        lambda r: [*EVAL, "--base-url", "http://127.0.0.1:1/v1"],
        2,
        "--base-url",
    ),  # fmt: skip
    (
        "hf adapter missing",
        lambda r: ["eval", "--game", "ipd", "--agent", "hf", "--adapter", "/nope"],
        2,
        "/nope",
    ),  # fmt: skip
    (
        "hf model path missing",
        lambda r: ["eval", "--game", "ipd", "--agent", "hf:/nonexistent/model"],
        2,
        "/nonexistent/model",
    ),  # fmt: skip
    (
        "openai base url not a url",
        lambda r: ["eval", "--game", "ipd", "--agent", "openai:m", "--base-url", "not a url"],
        2,
        "not a url",
    ),  # fmt: skip
    (
        "tournament episodes 0",
        lambda r: [
            "tournament",
            "--game",
            "ipd",
            "--agents",
            "TitForTat,AlwaysDefect",
            "--episodes",
            "0",
        ],
        2,
        "--episodes",
    ),  # fmt: skip
    ("gen-sft out is a file", lambda r: ["gen-sft", "--out", str(setup_file(r))], 2, "is a file"),
    (
        "sepo steps negative",
        lambda r: ["train", "sepo", "--game", "ipd", "--steps", "-1"],
        2,
        "--steps",
    ),  # fmt: skip
    ("sepo on bargaining", lambda r: ["train", "sepo", "--game", "bargaining"], 2, "SEPO games"),
    ("report on a tournament", lambda r: ["report", str(make_tournament(r))], 2, "tournament"),
    (
        "report without run.json",
        lambda r: ["report", str(traces_without_manifest(r))],
        2,
        "run.json",
    ),  # fmt: skip
    ("report on mixed-up traces", lambda r: ["report", str(mixed_up(r))], 2, "mixed up"),
]
# fmt: off
CASES += [
    # numbers no run can hold; --steps -1 (or --iterations -1) only so a run never starts
    ("sepo lr nan", lambda r: ["train", "sepo", *TRAIN_LR, "nan", "--steps", "-1"], 2, "finite"),
    ("selfplay lr inf", lambda r: ["train", "selfplay", *TRAIN_LR, "inf", "--iterations", "-1"],
     2, "--learning-rate"),
    ("bargaining lr negative", lambda r: ["train", "bargaining", *TRAIN_LR, "-0.1", "--steps",
     "-1"], 2, "--learning-rate: Input should be greater than 0"),
    ("sepo clip -1", lambda r: ["train", "sepo", "--clip", "-1", "--steps", "-1"], 2, "--clip"),
    ("solve iterations 1e20", lambda r: ["solve", "--game", "kuhn", "--iterations", "1" + "0" * 20,
     "--out", str(r / "solve")], 2, "--iterations"),
    ("solve iterations 1e20 in a config", lambda r: ["solve", "--config", str(config(
        r, "game: kuhn\niterations: 1.0e+20\n")), "--out", str(r / "solve")], 2, "--iterations"),
    ("gen-sft duplicate agents", lambda r: ["gen-sft", "--game", "ipd", "--agents",
     "TitForTat,TitForTat", "--out", str(r / "sft")], 2, "'TitForTat' is named twice"),
    ("dond 4,000-digit contexts", lambda r: ["tournament", "--game", "dond", "--agents",
     "FairSplit,ValueGreedy", "-n", "1", "--param", f"contexts={huge_contexts(r)}",
     "--out", str(r / "dond")], 2, "beyond ±999"),
    # a run far beyond what the machine can finish, on a non-TTY: refused with its estimate
    ("eval of 1e9 episodes", lambda r: [*EVAL[:-1], "1000000000", "--out", str(r / "big")], 2,
     "this run plays 11,000,000,000 episodes, about 44.0 TB of traces"),
    ("tournament of 1e9 episodes", lambda r: ["tournament", "--game", "ipd", "--agents",
     "TitForTat,AlwaysDefect", "-n", "1000000000", "--out", str(r / "big")], 2, "add --yes"),
]
# fmt: on


@pytest.mark.parametrize(
    ("args", "code", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line(tmp_path, args, code, words):
    argv = args(tmp_path)
    folders = {p: sorted(p.rglob("*")) for p in tmp_path.iterdir() if p.is_dir()}
    before = {
        p: [(f, f.stat().st_size) for f in files if f.is_file()] for p, files in folders.items()
    }
    r = run(argv, tmp_path)
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr[-2000:]
    assert len(lines[0]) < 1000  # the rejected input is quoted in part, never whole
    for p, files in before.items():  # run folders are left as they were
        assert [(f, f.stat().st_size) for f in sorted(p.rglob("*")) if f.is_file()] == files


OUT_COMMANDS = {
    "eval": EVAL,
    "tournament": ["tournament", "--game", "ipd", "--agents", "TitForTat,AlwaysDefect", "-n", "1"],
    "gen-sft": ["gen-sft", "--datasets", "kuhn"],
    "train sft": ["train", "sft", "--data", "nodata"],
    "train sepo": ["train", "sepo", "--steps", "-1"],  # -1: an old run refused, never started
    "train selfplay": ["train", "selfplay", "--iterations", "-1"],
    "train bargaining": ["train", "bargaining", "--steps", "-1"],
}


@pytest.mark.parametrize("command", list(OUT_COMMANDS))
@pytest.mark.parametrize("out", ["", "bad\udcffname"], ids=["empty", "not utf-8"])
def test_a_bad_out_is_one_line_and_writes_nothing(tmp_path, command, out):
    """``--out ""`` never means the current folder; a name that is not UTF-8 is refused before
    anything (a folder, a 0-byte run.lock) is made."""
    r = run([*OUT_COMMANDS[command], "--out", out], tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    words = "--out is empty" if not out else "holds bytes that are not UTF-8"
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_config_may_say_new_run(tmp_path):
    config = tmp_path / "eval.yaml"
    config.write_text(f"game: ipd\nagent: strategy:TitForTat\nepisodes: 1\nnew_run: true\n"
                      f"out: {tmp_path / 'run'}\n")  # fmt: skip
    for _ in range(2):
        assert run(["eval", "--config", str(config)], tmp_path).returncode == 0
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("run-")]) == 2


@contextlib.contextmanager
def tmpfs(path: Path, options: str):
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                             capture_output=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip("this machine cannot mount a small tmpfs (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_a_read_only_folder_is_one_line(tmp_path):
    with tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
        r = run([*EVAL, "--out", str(ro / "run")], tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "read-only" in r.stderr


def test_a_full_disk_ends_in_one_line_and_resumes_once_space_is_freed(tmp_path):
    cmd = ["eval", "--game", "ipd", "--agent", "strategy:Mixed", "--episodes", "200"]
    with tmpfs(tmp_path / "small", "size=256k") as small:
        out = small / "run"
        r = run([*cmd, "--out", str(out)], tmp_path)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "disk is full" in r.stderr
        assert not (out / "run.json.tmp").exists()
        kept = out.with_name("kept")
        shutil.copytree(out, tmp_path / "kept")
    # space freed: the same folder contents on a roomy disk resume to the full run
    moved = tmp_path / "kept"
    r = run([*cmd, "--out", str(moved)], tmp_path)
    assert r.returncode == 0, r.stderr
    lines = (moved / "traces.jsonl").read_text().splitlines()
    ids = [json.loads(x)["episode_id"] for x in lines]
    assert len(ids) == len(set(ids)) == 200 * 11
    assert kept.name == "kept"


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends


@pytest.mark.parametrize("server", ["closed port", "500 forever"])
def test_a_run_that_produced_nothing_says_so(tmp_path, server):
    """A9: every call fails → exit ≠ 0, one line with the coverage, no 0.0 metric with n = 0."""
    from tests.backends.fault_server import FaultServer

    out = tmp_path / "run"
    argv = ["eval", "--game", "ipd", "--agent", "openai:m", "--episodes", "1",
            "--max-retries", "0", "--attempt-timeout", "2", "--out", str(out)]  # fmt: skip
    with contextlib.ExitStack() as stack:
        if server == "closed port":
            url = f"http://127.0.0.1:{closed_port()}/v1"
        else:
            url = stack.enter_context(FaultServer([("status", 500, {})])).url
        r = run([*argv, "--base-url", url], tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "coverage: 0 of 11 episodes complete" in lines[0]
    assert json.loads((out / "run.json").read_text())["status"] == "error"
    import csv

    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert rows and all(row["value"] == "" for row in rows if row["n"] == "0")
    assert not any(row["value"] in ("0.0", "0") and row["n"] == "0" for row in rows)
