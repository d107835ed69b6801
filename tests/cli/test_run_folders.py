"""Run folders under concurrency, lost files and signals (RELIABILITY A8, A5b), as a user meets
them: real subprocesses of the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stratagem.runs import fresh_folder

CLI = [sys.executable, "-m", "stratagem.cli.main"]


def eval_cmd(out: Path, episodes: int = 2000, seed: int = 3) -> list[str]:
    return [*CLI, "eval", "--game", "ipd", "--agent", "strategy:Mixed",
            "--episodes", str(episodes), "--seed", str(seed), "--out", str(out)]  # fmt: skip


def wait_for(path: Path, size: int = 1, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and not (path.exists() and path.stat().st_size >= size):
        time.sleep(0.02)


def ids(folder: Path) -> list[str]:
    lines = (folder / "traces.jsonl").read_text().splitlines()
    return [json.loads(line)["episode_id"] for line in lines]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_second_writer_is_refused_and_every_episode_is_written_once(tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen(eval_cmd(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(out / "traces.jsonl")
    start = time.monotonic()
    second = subprocess.run(eval_cmd(out), capture_output=True, text=True, timeout=60)
    assert second.returncode == 2 and time.monotonic() - start < 30
    assert f"pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    assert first.wait(timeout=300) == 0
    seen = ids(out)
    assert len(seen) == len(set(seen)) == 2000 * 11


def test_new_run_folders_are_unique_within_one_second(tmp_path):
    made = [fresh_folder(tmp_path / "run") for _ in range(5)]
    assert len(set(made)) == 5 and all(p.is_dir() for p in made)
    procs = [
        subprocess.Popen(
            [*eval_cmd(tmp_path / "cli", episodes=1), "--new-run"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        for _ in range(2)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    folders = [p for p in tmp_path.iterdir() if p.name.startswith("cli-")]
    assert len(folders) == 2 and all(len(ids(f)) == 11 for f in folders)


def test_lost_run_json_with_another_seed_is_refused_and_touches_nothing(tmp_path):
    out = tmp_path / "run"
    subprocess.run(eval_cmd(out, episodes=3), check=True, capture_output=True)
    (out / "run.json").unlink()
    before = snapshot(out)
    r = subprocess.run(eval_cmd(out, episodes=3, seed=4), capture_output=True, text=True)
    assert r.returncode == 2 and "other settings" in r.stderr and "Traceback" not in r.stderr
    assert snapshot(out) == before
    # the same settings adopt the folder: nothing to replay, a fresh run.json
    r = subprocess.run(eval_cmd(out, episodes=3), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert len(ids(out)) == 33


@pytest.mark.parametrize(
    "bad", [b"\n", b"{not json\n", b"[1, 2]\n", b'{"episode_id": 5}\n', b'{"episode_id": "x"}\n']
)
def test_a_bad_line_inside_the_trace_file_is_refused_with_its_number(tmp_path, bad):
    out = tmp_path / "run"
    subprocess.run(eval_cmd(out, episodes=2), check=True, capture_output=True)
    lines = (out / "traces.jsonl").read_bytes().splitlines(keepends=True)
    (out / "traces.jsonl").write_bytes(b"".join(lines[:5]) + bad + b"".join(lines[5:]))
    before = snapshot(out)
    r = subprocess.run(eval_cmd(out, episodes=2), capture_output=True, text=True)
    assert r.returncode == 2 and "traces.jsonl:6" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert snapshot(out) == before


def test_a_malformed_line_is_refused_by_report_too(tmp_path):
    out = tmp_path / "run"
    subprocess.run(eval_cmd(out, episodes=2), check=True, capture_output=True)
    with (out / "traces.jsonl").open("a") as f:
        f.write('{"episode_id": 5}\n')
    r = subprocess.run([*CLI, "report", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: {out}/traces.jsonl:23 is not a trace record (schema_version: Field required); "
        "remove that line (or the file) to go on"
    ]


def test_a_deleted_run_lock_lets_no_second_writer_in(tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen(eval_cmd(out, 300), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(out / "traces.jsonl")
    (out / "run.lock").unlink()
    second = subprocess.run(eval_cmd(out, 300), capture_output=True, text=True, timeout=60)
    assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr
    assert second.stderr.strip().splitlines() == [
        f"error: {out} is in use by another process; wait for it to finish or choose another --out"
    ]
    assert first.wait(timeout=300) == 0
    seen = ids(out)
    assert len(seen) == len(set(seen)) == 300 * 11


def test_an_interrupted_new_run_resumes_the_folder_it_made(tmp_path):
    """The hint names the fresh folder (and --no-new-run): pasted, it finishes that folder
    instead of starting a third one."""
    base = tmp_path / "run"
    proc = subprocess.Popen(
        [*eval_cmd(base, 300), "--new-run"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.time() + 60
    while time.time() < deadline and not list(tmp_path.glob("run-*/traces.jsonl")):
        time.sleep(0.02)
    (made,) = [p.parent for p in tmp_path.glob("run-*/traces.jsonl")]
    wait_for(made / "traces.jsonl", 100_000)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    argv = shlex.split(err.split("Resume with: ", 1)[1].strip())
    assert "--new-run" not in argv and argv[-3:] == ["--no-new-run", "--out", str(made)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["sh", "-c", shlex.join(argv)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert [p for p in tmp_path.iterdir()] == [made]
    seen = ids(made)
    assert len(seen) == len(set(seen)) == 300 * 11


def test_a_huge_run_goes_on_when_asked_with_yes(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [*eval_cmd(out, 1_000_000_000), "--yes"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_for(out / "traces.jsonl", 10_000)
        assert proc.poll() is None and (out / "traces.jsonl").stat().st_size >= 10_000
    finally:
        proc.kill()
        proc.wait()


def on_a_terminal(argv: list[str], answer: bytes) -> tuple[int, str]:
    """Runs ``argv`` on a pseudo-terminal, answers its question; returns (exit code, output)."""
    import pty
    import select

    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    seen = b""
    deadline = time.time() + 60
    try:
        while b"[y/N]" not in seen and time.time() < deadline:
            if select.select([leader], [], [], 1)[0]:
                seen += os.read(leader, 4096)
        os.write(leader, answer)
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    with contextlib.suppress(OSError):  # the terminal closes with the process
        while chunk := os.read(leader, 4096):
            seen += chunk
    os.close(leader)
    return code, seen.decode("utf-8", "replace")


def test_a_huge_run_asks_on_a_terminal(tmp_path):
    out = tmp_path / "run"
    code, output = on_a_terminal(eval_cmd(out, 1_000_000_000), b"n\n")
    assert code == 2 and "Traceback" not in output
    assert "this run plays 11,000,000,000 episodes, about 44.0 TB of traces" in output
    assert not (out / "traces.jsonl").exists()


def test_a_duplicate_episode_is_an_error_never_counted_twice(tmp_path):
    out = tmp_path / "run"
    subprocess.run(eval_cmd(out, episodes=2), check=True, capture_output=True)
    lines = (out / "traces.jsonl").read_bytes().splitlines(keepends=True)
    (out / "traces.jsonl").write_bytes(b"".join([*lines, lines[0]]))
    r = subprocess.run([*CLI, "report", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "repeats episode" in r.stderr and "Traceback" not in r.stderr


def test_sigterm_marks_the_run_interrupted_and_prints_a_pasteable_resume_command(tmp_path):
    out = tmp_path / "a b$c;d'e\"f"
    proc = subprocess.Popen(
        eval_cmd(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wait_for(out / "traces.jsonl", 200_000)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    hint = err.split("Resume with: ", 1)[1].strip()
    argv = shlex.split(hint)
    assert argv[0] == "stratagem" and argv[argv.index("--out") + 1] == str(out)
    # the printed command, run by sh, resumes the same folder
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["sh", "-c", hint], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    seen = ids(out)
    assert len(seen) == len(set(seen)) == 2000 * 11
