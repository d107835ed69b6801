"""Distributed play without a cluster: plain match specs, the worker's loop, the pluggable player
of run folders, and the CLI's Ray options."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys

import pytest

from stratagem.agents.spec import LLMOptions
from stratagem.cluster import RayWorkerError
from stratagem.errors import ConfigError, StratagemError
from stratagem.games import GameSpec, get_game
from stratagem.play import play
from stratagem.runs import RunFolder
from stratagem.strategies import get_strategy
from stratagem.tournament import round_robin_specs
from stratagem.tournament.ray import RayPlayer, Worker
from stratagem.tournament.schedule import MatchSpec, RemoteAgent
from stratagem.tournament.schedule import match_spec as to_match
from tests.scale.canonical import ids

NAMES = ("Boulware", "Linear", "Conceder")


def bargaining_specs(count: int = 4):
    game = get_game("bargaining")
    agents = {n: get_strategy("bargaining", n) for n in NAMES}
    scenarios = game.tournament_scenarios(count // 2, count - count // 2, 42)
    return game, list(round_robin_specs(agents, count=count, seed=42, scenarios=scenarios))


def test_match_specs_are_plain_data_that_rebuild_the_same_episodes():
    game, specs = bargaining_specs()
    matches = [to_match(s, game, {}) for s in specs]
    first = matches[0]
    assert first.agents == ("strategy:Boulware", "strategy:Boulware")
    assert isinstance(first.scenario, dict)
    text = json.dumps([dataclasses.asdict(m) for m in matches])  # JSON all the way down
    again = [MatchSpec(**{**d, "agents": tuple(d["agents"])}) for d in json.loads(text)]
    assert again == matches and pickle.loads(pickle.dumps(matches)) == matches
    worker = Worker(GameSpec.of(game), LLMOptions())
    remote = [t for batch in worker.play(again, flush_seconds=0) for t in batch]
    local = list(play(game, specs))
    assert sorted(t.to_json() for t in remote) == sorted(t.to_json() for t in local)


def test_the_worker_builds_each_agent_once_and_streams_traces():
    game, specs = bargaining_specs(count=6)
    worker = Worker(GameSpec.of(game), LLMOptions())
    matches = [to_match(s, game, {}) for s in specs]
    batches = list(worker.play(matches[:20], flush_seconds=0))
    assert len(batches) == 20 and all(len(b) == 1 for b in batches)  # one per finished episode
    built = dict(worker.agents)
    assert sorted(built) == sorted(f"strategy:{n}" for n in NAMES)
    batches = list(worker.play(matches[20:], flush_seconds=3600))
    assert len(batches) == 1 and len(batches[0]) == len(matches) - 20  # all at the end
    assert all(worker.agents[k] is v for k, v in built.items())  # reused, not rebuilt


def test_agents_become_spec_strings_or_are_refused():
    game = get_game("ipd")
    spec = next(iter(round_robin_specs({"a": get_strategy("ipd", "TitForTat")}, count=1, seed=0)))
    assert to_match(spec, game, {}).agents == ("strategy:TitForTat",) * 2
    named = dataclasses.replace(spec, agents=(RemoteAgent("hf", "model"), spec.agents[1]))
    assert to_match(named, game, {}).agents == ("hf", "strategy:TitForTat")
    mixed = get_strategy("ipd", "Mixed")
    tuned = dataclasses.replace(mixed, p=mixed.p / 2)  # not what strategy:Mixed builds
    odd = dataclasses.replace(spec, agents=(tuned, spec.agents[1]))
    with pytest.raises(ConfigError, match="cannot be rebuilt on a Ray worker"):
        to_match(odd, game, {})
    assert to_match(odd, game, {"Mixed": "strategy:Mixed"}).agents[0] == "strategy:Mixed"
    with pytest.raises(StratagemError, match="plays on Ray workers only"):
        RemoteAgent("hf", "model").act([])


def test_a_run_folder_plays_with_any_player_and_keeps_keying_and_resume(tmp_path):
    """The player only plays: keying, skipping finished ids and writing stay in RunFolder."""
    game, specs = bargaining_specs()
    seen: list[list[str]] = []

    def reversed_player(game, episodes, *, max_live, skip, on_error, on_finish):
        episodes = [s for s in episodes if s.episode_id not in skip]
        seen.append([s.episode_id for s in episodes])
        for n, trace in enumerate(play(game, episodes[::-1], on_error=on_error), start=1):
            if on_finish is not None:
                on_finish(trace)
            yield trace
            if len(seen) == 1 and n == 6:
                raise KeyboardInterrupt  # a first run stopped after six episodes

    fingerprint = {"job": "test", "n": len(specs)}
    finished = []
    with pytest.raises(KeyboardInterrupt), RunFolder(tmp_path, fingerprint) as run:
        run.play(game, specs, player=reversed_player, on_episode=finished.append)
    assert len(ids(tmp_path)) == len(finished) == 6
    with RunFolder(tmp_path, fingerprint) as run:
        key = run.key
        assert run.play(game, specs, player=reversed_player) == 0
    assert all(i.startswith(f"{key}/") for i in seen[0])
    assert len(seen[1]) == len(specs) - 6  # the resumed run was offered only the rest
    assert sorted(ids(tmp_path)) == sorted(f"{key}/{s.episode_id}" for s in specs)


def test_without_ray_installed_the_player_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    game, specs = bargaining_specs()
    with pytest.raises(RayWorkerError, match=r"pip install 'stratagem\[ray\]'"):
        next(RayPlayer()(game, specs))
    assert list(RayPlayer()(game, specs, skip={s.episode_id for s in specs})) == []


def test_bad_player_settings_are_refused():
    with pytest.raises(ConfigError, match="--workers"):
        RayPlayer(workers=0)
    assert RayPlayer(address="local").address is None
    assert RayPlayer(address="ray://head:10001").runtime == {
        "ray": "ray://head:10001",
        "workers": None,
    }


@pytest.mark.parametrize("command", ["eval", "tournament"])
def test_workers_without_ray_is_a_one_line_error(command, tmp_path):
    args = {
        "eval": ["--game", "ipd", "--agent", "strategy:TitForTat"],
        "tournament": ["--game", "ipd", "--agents", "TitForTat"],
    }[command]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stratagem.cli.main",
            command,
            *args,
            "--workers",
            "2",
            "--out",
            str(tmp_path / "run"),
        ],  # fmt: skip
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "add --ray" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()
