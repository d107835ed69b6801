"""Run folders under edited, deleted and malformed files, and paths named several ways
(RELIABILITY A8, A8b, A8c): each trace checked by its own key, a lock no deleted file opens, every
bad trace line refused by number, one folder under one fingerprint however it is named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stratagem.agents.spec import LLMOptions
from stratagem.cli.launch import LARGE_RUN, check_size, resume_command
from stratagem.errors import ConfigDriftError, ConfigError
from stratagem.evaluation.pools import evaluate
from stratagem.games import get_game
from stratagem.runs import (
    LOCK,
    MANIFEST,
    TRACES,
    RunFolder,
    TraceFileError,
    fingerprint_key,
    scan_traces,
)
from stratagem.strategies import get_strategy


def ipd_run(out: Path, seed: int = 3) -> None:
    game = get_game("ipd")
    evaluate(game, get_strategy("ipd", "TitForTat"), episodes=2, seed=seed, out=out)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_edited_run_json_cannot_adopt_another_runs_episodes(tmp_path):
    """run.json says seed 4 but its traces are seed 3's: refused by the traces' own key, the
    folder untouched (it used to keep the old episodes beside the new ones)."""
    out = tmp_path / "run"
    ipd_run(out, seed=3)
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["fingerprint"]["seed"] = 4
    (out / MANIFEST).write_text(json.dumps(manifest))
    before = snapshot(out)
    with pytest.raises(ConfigDriftError, match=r"traces.jsonl:1 holds episode .* other settings"):
        ipd_run(out, seed=4)
    assert snapshot(out) == before
    ids = [json.loads(x)["episode_id"] for x in (out / TRACES).read_text().splitlines()]
    assert len(ids) == 22 and len({i.split("/")[0] for i in ids}) == 1


def test_a_folder_without_run_json_is_adopted_only_by_its_own_settings(tmp_path):
    out = tmp_path / "run"
    ipd_run(out, seed=3)
    (out / MANIFEST).unlink()
    with pytest.raises(ConfigDriftError, match="other settings"):
        ipd_run(out, seed=4)
    ipd_run(out, seed=3)
    assert json.loads((out / MANIFEST).read_text())["status"] == "complete"


def good_line(tmp_path: Path) -> dict:
    ipd_run(tmp_path / "source")
    return json.loads((tmp_path / "source" / TRACES).read_text().splitlines()[0])


BAD_LINES = {
    "episode id only": lambda good: json.dumps({"episode_id": 5}),
    "not json": lambda good: "{not json",
    "a list": lambda good: "[1, 2]",
    "null": lambda good: "null",
    "blank": lambda good: "   ",
    "id is a number": lambda good: json.dumps({**good, "episode_id": 5}),
    "seed is text": lambda good: json.dumps({**good, "seed": "three"}),
    "rounds missing": lambda good: json.dumps({k: v for k, v in good.items() if k != "rounds"}),
    "payoff is text": lambda good: json.dumps(
        {**good, "rounds": [{**good["rounds"][0], "payoffs": ["a", 0]}]}
    ),
    "unknown status": lambda good: json.dumps({**good, "status": "done"}),
    "unknown field": lambda good: json.dumps({**good, "extra": 1}),
}


@pytest.mark.parametrize("bad", list(BAD_LINES), ids=list(BAD_LINES))
def test_every_malformed_trace_line_is_refused_by_its_number(tmp_path, bad):
    good = good_line(tmp_path)
    path = tmp_path / TRACES
    line = BAD_LINES[bad]({**good, "episode_id": good["episode_id"] + "-bad"})  # ids all distinct
    other = {**good, "episode_id": good["episode_id"] + "-other"}
    path.write_text("\n".join([json.dumps(good), line, json.dumps(other), ""]))
    with pytest.raises(TraceFileError) as info:
        scan_traces(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2 is ") and "\n" not in message and len(message) < 300
    assert "three" not in message  # the reason, never the line itself


def test_the_trace_writer_and_reader_refuse_a_malformed_line_by_its_number(tmp_path):
    """Whatever reads a trace file (not only a run folder) names the line, never a KeyError."""
    from stratagem.trace import TraceWriter, read_traces

    good = good_line(tmp_path)
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(good) + '\n{"episode_id": 5}\n')
    with pytest.raises(TraceFileError, match=r"t.jsonl:2 is not a trace record \(schema_version"):
        TraceWriter(path)
    with pytest.raises(TraceFileError, match=r"t.jsonl:2 is not a trace record; remove"):
        read_traces(path)


def test_a_malformed_line_in_a_run_folder_is_refused_and_touches_nothing(tmp_path):
    out = tmp_path / "run"
    ipd_run(out)
    lines = (out / TRACES).read_text().splitlines(keepends=True)
    (out / TRACES).write_text("".join([*lines[:3], '{"episode_id": 5}\n', *lines[3:]]))
    before = snapshot(out)
    with pytest.raises(TraceFileError, match=r"traces.jsonl:4 is not a trace record"):
        ipd_run(out)
    assert snapshot(out) == before


HOLD = """
import sys, time
from stratagem.runs import RunFolder
with RunFolder(sys.argv[1], {"job": "hold"}):
    print("holding", flush=True)
    time.sleep(120)
"""


def test_deleting_run_lock_lets_no_second_writer_in(tmp_path):
    """Two real processes: the first holds the folder, run.lock is deleted, the second is still
    refused (the lock is on the folder itself)."""
    out = tmp_path / "run"
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout is not None and first.stdout.readline() == "holding\n"
        assert f"pid {first.pid}" in (out / LOCK).read_text()
        (out / LOCK).unlink()
        second = subprocess.run(
            [sys.executable, "-c", HOLD, str(out)], capture_output=True, text=True, timeout=60
        )
        assert second.returncode != 0 and "holding" not in second.stdout
        assert "RunLockedError" in second.stderr and "is in use by another process" in second.stderr
    finally:
        first.kill()
        first.wait()
    with RunFolder(out, {"job": "hold"}):  # the first gone, the folder opens again
        assert f"pid {os.getpid()}" in (out / LOCK).read_text()


def test_a_folder_named_three_ways_is_one_training_run(tmp_path, monkeypatch):
    """Relative, absolute and through a link: one fingerprint, so the run resumes."""
    from stratagem.training.sepo.trainer import SEPOArgs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "runs")
    ways = [Path("runs/sepo"), tmp_path / "runs" / "sepo", Path("link/sepo"), Path("./runs/sepo")]
    prints = [SEPOArgs(out=way, adapter="sft/adapter").fingerprint() for way in ways]
    assert all(p == prints[0] for p in prints)
    assert prints[0]["out"] == str(tmp_path / "runs" / "sepo")
    assert prints[0]["adapter"] == str(tmp_path / "sft" / "adapter")
    for way, fingerprint in zip(ways, prints, strict=True):
        RunFolder(way, fingerprint).close()  # reopened: no drift


def test_an_eval_folder_named_three_ways_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ipd_run(Path("run"))
    (tmp_path / "link").symlink_to(tmp_path / "run")
    before = (tmp_path / "run" / TRACES).read_bytes()
    for way in (tmp_path / "run", Path("link"), Path("./run/../run")):
        ipd_run(way)  # nothing left to play: the trace file is as it was
        assert (tmp_path / "run" / TRACES).read_bytes() == before


def test_an_adapter_named_two_ways_is_one_eval_fingerprint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    relative = LLMOptions(adapter="a/adapter,b").fingerprint()
    absolute = LLMOptions(adapter=f"{tmp_path}/a/adapter,{tmp_path}/b").fingerprint()
    assert relative == absolute and relative["adapter"] == f"{tmp_path}/a/adapter,{tmp_path}/b"
    assert LLMOptions().fingerprint()["adapter"] is None


def test_a_run_that_stored_its_paths_as_typed_still_resumes_under_its_own_key(
    tmp_path, monkeypatch
):
    """Folders made before paths were resolved hold them relative: the same folder reopens,
    keeping the stored fingerprint (and so its episodes' key)."""
    monkeypatch.chdir(tmp_path)
    old = {"out": "runs/x", "llm": {"adapter": "sft,more"}, "seed": 1}
    RunFolder("runs/x", old).close()
    new = {"out": str(tmp_path / "runs/x"), "llm": {"adapter": f"{tmp_path}/sft,{tmp_path}/more"}}
    with RunFolder(tmp_path / "runs/x", {**new, "seed": 1}) as run:
        assert run.key == fingerprint_key(old) and run.fingerprint == old
    with pytest.raises(ConfigDriftError, match="seed: 1 -> 2"):
        RunFolder(tmp_path / "runs/x", {**new, "seed": 2})
    with pytest.raises(ConfigDriftError, match="out: 'runs/x' -> "):
        RunFolder(tmp_path / "runs/x", {**new, "out": str(tmp_path / "other"), "seed": 1})


@pytest.mark.parametrize("path", ["", "   ", "bad\udcffname"], ids=["empty", "blank", "not utf-8"])
def test_a_bad_folder_name_is_refused_before_anything_is_made(tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="--out"):
        RunFolder(path, {"job": "x"})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "options", "hint"),
    [
        (["stratagem", "eval", "-g", "ipd", "--new-run", "--out", "r"], {"new_run": True},
         "stratagem eval -g ipd --no-new-run --out r-20250101-000000"),
        (["stratagem", "eval", "--new-run", "-o", "r"], {"new_run": True},
         "stratagem eval --no-new-run --out r-20250101-000000"),
        (["stratagem", "eval", "--out=r", "--new-run"], {"new_run": True},
         "stratagem eval --no-new-run --out r-20250101-000000"),
        (["stratagem", "eval", "-c", "e.yaml"], {"new_run": None, "config": "e.yaml"},
         "stratagem eval -c e.yaml --no-new-run --out r-20250101-000000"),
        (["stratagem", "eval", "-c", "e.yaml", "--no-new-run"], {"new_run": False, "config": "e"},
         "stratagem eval -c e.yaml --no-new-run"),
        (["stratagem", "eval", "--out", "r"], {"new_run": None}, "stratagem eval --out r"),
        (["stratagem", "tournament", "-c", "t.yaml"], {"config": "t.yaml"},
         "stratagem tournament -c t.yaml"),
    ],
)  # fmt: skip
def test_the_resume_hint_of_a_fresh_folder_names_it(argv, options, hint):
    assert resume_command(argv, Path("r-20250101-000000"), options) == hint
    assert resume_command(["/bin/stratagem", *argv[1:]], None, options) == " ".join(argv)


def test_a_huge_run_asks_first_and_says_how_big(tmp_path):
    asked: list[str] = []
    check_size(LARGE_RUN, tmp_path, ask=lambda q: asked.append(q) or False)  # at the limit: runs
    assert asked == []
    with pytest.raises(ConfigError) as info:
        check_size(11 * 10**9, tmp_path, ask=lambda q: asked.append(q) or False)
    assert asked == [
        "this run plays 11,000,000,000 episodes, about 44.0 TB of traces (~4.0 KB each), more "
        f"than the {asked[0].split('than the ')[1].split(' free')[0]} free on its disk. "
        "Start it? [y/N] "
    ]
    assert str(info.value).endswith("starts only when asked: add --yes to start it")
    check_size(11 * 10**9, tmp_path, ask=lambda q: True)  # a yes on the terminal
    check_size(11 * 10**9, tmp_path, yes=True)  # --yes
    (tmp_path / TRACES).write_bytes(b"x" * 99 + b"\n")  # measured from the folder's own traces
    with pytest.raises(ConfigError, match=r"about 200.0 MB of traces \(~100 bytes each\)"):
        check_size(2 * LARGE_RUN, tmp_path)
