"""A Ray tournament names its model agents on the driver and loads them on the workers only."""

from __future__ import annotations

import pytest

from stratagem.cli.tournament import _build_agents
from stratagem.games import get_game
from stratagem.tournament.schedule import RemoteAgent


@pytest.mark.parametrize("spec", ["hf", "hf:some/model", "vllm"])
def test_a_remote_model_agent_is_built_without_a_model_or_ray(spec):
    game = get_game("ipd")
    built, specs = _build_agents([spec, "TitForTat"], game, options=None, remote=True)
    remote = built[spec.replace("|", "_")]
    assert isinstance(remote, RemoteAgent)
    assert (remote.spec, remote.name) == (spec, spec)
    # the strategy is built here and named for the workers; the model is not
    assert specs == {"TitForTat": "strategy:TitForTat"}


def test_without_ray_a_model_agent_is_not_remote():
    game = get_game("ipd")
    built, _ = _build_agents(["TitForTat"], game, options=None, remote=False)
    assert not isinstance(built["TitForTat"], RemoteAgent)
