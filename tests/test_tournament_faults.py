"""Round robins under faults: failed episodes are counted, named by pairing and exit 1 like
``eval`` (RELIABILITY A4, A9), a round robin whose every episode fails still writes its run
state, and a resumed round robin's tables equal an uninterrupted one's byte for byte (A1)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stratagem.agent import Strategy
from stratagem.errors import IncompleteRunError
from stratagem.games import get_game
from stratagem.strategies import get_strategy
from stratagem.tournament import round_robin

CLI = [sys.executable, "-m", "stratagem.cli.main"]


class Broken(Strategy):
    """A strategy that raises on every move."""

    def choose(self, view, rng):
        raise RuntimeError("broken on purpose")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tournament(out: Path, agents: str) -> subprocess.CompletedProcess:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    return subprocess.run(
        [*CLI, "tournament", "--game", "ipd", "--agents", agents, "--base-url", url,
         "--max-retries", "0", "--episodes", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_failed_episodes_are_counted_by_pairing_and_raise_with_the_coverage(tmp_path):
    game = get_game("ipd")
    agents = {"TitForTat": get_strategy("ipd", "TitForTat"), "Broken": Broken()}
    result = round_robin(game, agents, tmp_path, count=3)
    assert (result.episodes, result.errors) == (3, 9)
    assert result.failed == {
        "TitForTat vs Broken": 3,
        "Broken vs TitForTat": 3,
        "Broken vs Broken": 3,
    }
    assert result.first_error == "RuntimeError: broken on purpose"
    line = (
        "coverage: 3 of 12 episodes complete; 9 failed, in Broken vs Broken (3), Broken vs "
        "TitForTat (3), TitForTat vs Broken (3) (first: RuntimeError: broken on purpose). Rerun "
        "the same command to retry them."
    )
    assert result.coverage() == line
    with pytest.raises(IncompleteRunError, match="^coverage: 3 of 12") as caught:
        result.check()
    assert caught.value.exit_code == 1
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert (manifest["status"], manifest["episodes"], manifest["errors"]) == ("partial", 3, 9)


def test_a_partly_failed_tournament_exits_1_naming_the_failing_pairings(tmp_path):
    done = tournament(tmp_path / "rr", "TitForTat,openai:m")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: coverage: 2 of 8 episodes complete; 6 failed, in TitForTat vs openai:m (2), "
        "openai:m vs TitForTat (2), openai:m vs openai:m (2) (first: connection error:"
    )
    manifest = json.loads((tmp_path / "rr" / "run.json").read_text())
    assert (manifest["status"], manifest["episodes"], manifest["errors"]) == ("partial", 2, 6)


def test_a_tournament_whose_every_episode_fails_writes_its_state_and_one_line(tmp_path):
    done = tournament(tmp_path / "rr", "openai:m,openai:n")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: coverage: 0 of 8 episodes complete; 8 failed, in openai:m vs openai:m (2), "
    )
    assert "no episode completed" in done.stdout
    manifest = json.loads((tmp_path / "rr" / "run.json").read_text())
    assert (manifest["status"], manifest["episodes"], manifest["errors"]) == ("error", 0, 8)
    summary = (tmp_path / "rr" / "summary.csv").read_text()
    assert summary == "agent,seat,mean,sem,count\n"


def interrupted_then_resumed(game, names, out: Path, count: int, after: int) -> None:
    seen: list[str] = []

    def stop(trace):
        seen.append(trace.episode_id)
        if len(seen) == after:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        round_robin(game, {n: get_strategy(game.name, n) for n in names}, out, count=count,
                    on_episode=stop)  # fmt: skip
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    round_robin(game, {n: get_strategy(game.name, n) for n in names}, out, count=count)


@pytest.mark.parametrize(
    ("game", "names", "count", "after"),
    [
        # episodes of different lengths: a resumed run appends them in another order
        ("kuhn", ("NashApprox", "BluffHeavy", "RandomLegal", "TightValue"), 20, 37),
        ("dond", ("ValueGreedy", "FairSplit", "Cooperative", "RandomNegotiator"), 20, 37),
    ],
)
def test_a_resumed_tournament_writes_the_uninterrupted_tables_byte_for_byte(
    tmp_path, game, names, count, after
):
    the_game = get_game(game, **({"lam": 0.37} if game == "dond" else {}))
    whole = tmp_path / "whole"
    round_robin(the_game, {n: get_strategy(game, n) for n in names}, whole, count=count)
    resumed = tmp_path / "resumed"
    interrupted_then_resumed(the_game, names, resumed, count, after)
    lines = (resumed / "traces.jsonl").read_text().splitlines()
    assert lines != (whole / "traces.jsonl").read_text().splitlines()  # another order on disk
    assert sorted(lines) == sorted((whole / "traces.jsonl").read_text().splitlines())
    for table in ("summary.csv", "summary.md"):
        assert (resumed / table).read_bytes() == (whole / table).read_bytes(), table
