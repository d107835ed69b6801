"""Runs on a local Ray cluster of 2 CPUs (one per module): the same traces as a local run, a
killed worker loses nothing, a worker's error surfaces as itself (SPEC §10, RELIABILITY A1)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from stratagem.cluster import RayWorkerError
from stratagem.errors import UnknownNameError
from stratagem.evaluation.pools import evaluate
from stratagem.games import get_game
from stratagem.strategies import get_strategy
from stratagem.tournament import round_robin
from stratagem.tournament.ray import RayPlayer
from stratagem.tournament.schedule import RemoteAgent
from tests.scale.canonical import canonical, ids

ray = pytest.importorskip("ray")

NAMES = ("Boulware", "Linear", "Conceder", "NaiveAccepter")


def bargaining(out, player=None, on_episode=None, gft=30, ngft=15):
    game = get_game("bargaining")
    scenarios = game.tournament_scenarios(gft, ngft, 42)
    agents = {n: get_strategy("bargaining", n) for n in NAMES}
    return round_robin(
        game,
        agents,
        out,
        count=len(scenarios),
        scenarios=scenarios,
        player=player,
        on_episode=on_episode,
    )


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    bargaining(out)
    return out


def test_a_tournament_on_ray_equals_the_local_one_byte_for_byte(cluster, local_run, tmp_path):
    player = RayPlayer(workers=2)
    result = bargaining(tmp_path, player)
    assert result.errors == 0 and result.episodes == len(NAMES) ** 2 * 45
    assert canonical(tmp_path) == canonical(local_run)
    for table in ("summary.csv", "profiles.csv", "ranking.csv"):
        assert (tmp_path / table).read_bytes() == (local_run / table).read_bytes(), table
    assert len(player.pids) == 0 and player.deaths == 0  # the workers are gone after the run


def test_a_killed_worker_loses_only_its_unfinished_episodes(cluster, local_run, tmp_path):
    player = RayPlayer(workers=2, chunk=40)
    seen: list[str] = []
    victims: list[int] = []

    def kill_one_worker(trace):
        seen.append(trace.episode_id)
        if len(seen) == 100:
            victims.append(player.pids[0])
            os.kill(victims[0], signal.SIGKILL)

    result = bargaining(tmp_path, player, on_episode=kill_one_worker)
    assert victims and player.deaths == 1
    assert result.episodes == len(NAMES) ** 2 * 45 and result.errors == 0
    found = ids(tmp_path)
    assert len(found) == len(set(found)) == len(seen)  # every episode once, none lost
    assert canonical(tmp_path) == canonical(local_run)


def test_an_evaluation_on_ray_equals_the_local_one(cluster, tmp_path):
    game = get_game("ipd")
    agent = get_strategy("ipd", "Mixed")
    local = evaluate(game, agent, episodes=12, seed=5, out=tmp_path / "local")
    remote = evaluate(
        game, agent, episodes=12, seed=5, out=tmp_path / "ray", player=RayPlayer(workers=2)
    )
    assert remote.metrics == local.metrics and remote.episodes == local.episodes
    assert canonical(tmp_path / "ray") == canonical(tmp_path / "local")
    assert (tmp_path / "ray" / "metrics.csv").read_bytes() == (
        tmp_path / "local" / "metrics.csv"
    ).read_bytes()


def test_a_worker_error_surfaces_as_itself(cluster, tmp_path):
    game = get_game("ipd")
    agents = {"good": get_strategy("ipd", "TitForTat"), "bad": RemoteAgent("strategy:Nope", "x")}
    with pytest.raises(UnknownNameError, match="Nope"):
        round_robin(game, agents, tmp_path, count=2, player=RayPlayer(workers=1))


def test_too_many_worker_deaths_stop_the_run_and_a_rerun_finishes_it(cluster, local_run, tmp_path):
    player = RayPlayer(workers=2, chunk=40, max_worker_deaths=0)

    def kill_a_worker(trace):
        if player.pids and player.pids[0] > 0:
            os.kill(player.pids[0], signal.SIGKILL)
            player.pids[0] = -1

    with pytest.raises(RayWorkerError, match="died 1 times"):
        bargaining(tmp_path, player, on_episode=kill_a_worker)
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert manifest["status"] == "error" and "died 1 times" in manifest["error"]
    kept = ids(tmp_path)
    assert len(kept) == len(set(kept)) > 0
    bargaining(tmp_path)  # resumed locally: Ray is a runtime setting, not part of the run
    assert canonical(tmp_path) == canonical(local_run)
