"""Dialogue trees on the embedded SmolLM2 (slow: minutes on a shared CPU)."""

from __future__ import annotations

import pytest

from stratagem.backends.cache import CachedBackend
from stratagem.games.dialogue import get_domain
from stratagem.solvers.cfr import solve
from stratagem.solvers.dialogue import DialogueTree, expand

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model():
    from stratagem.backends.hf import HFBackend

    return HFBackend("embedded")


def test_meeting_tree_on_the_embedded_model(model, tmp_path):
    domain = get_domain("meeting", ("Monday", "any"))
    backend = CachedBackend(model, tmp_path / "cache.sqlite")
    trees = [DialogueTree(domain, domain.scenario(s), backend, replies=2, seeds=2) for s in (0, 1)]
    stats = expand(trees)
    assert stats.model_calls <= 2 and stats.messages > 0  # one call per depth, no judge
    solution = solve(trees[0].root, "cfr+", 200, points=2)
    assert all(abs(sum(d.values()) - 1) < 1e-9 for d in solution.policy.values())
    # a message is a function of (chat, seed): written again alone, it comes out the same
    path = next(p for p in trees[0].history if len(p) == 1)
    (instruction, j) = path[0]
    chat = domain.chat(trees[0].scenario, trees[0].history[()], 1, instruction)
    again = model.generate(
        [chat], trees[0].sampling, seeds=[trees[0].seed_values[j]], stop=[domain.stop]
    )
    assert domain.clean(again[0].text, trees[0].scenario, 1) == trees[0].history[path][-1]
    # a second expansion of the same trees is served from the cache
    fresh = CachedBackend(model, tmp_path / "cache.sqlite")
    again_trees = [DialogueTree(domain, t.scenario, fresh, replies=2, seeds=2) for t in trees]
    assert expand(again_trees).model_calls == 0


def test_a_live_dialogue_steered_by_a_saved_mlp_on_the_embedded_model(model, tmp_path):
    from stratagem.solvers.dialogue import live
    from stratagem.training import imitation

    domain = get_domain("meeting", ("Monday", "any"))
    backend = CachedBackend(model, tmp_path / "cache.sqlite")
    tree = DialogueTree(domain, domain.scenario(0), backend, replies=2, seeds=1)
    expand([tree])
    embed = imitation.load_embedder()
    data = imitation.build_dataset([tree], imitation.cfr_policies([tree], 200), embed)
    mlp, _ = imitation.train(data, imitation.Args(hidden=16, steps=50))
    imitation.save_policy(tmp_path / "mlp.pt", mlp, data.instructions, train_scenarios=1)
    steer = imitation.load_policy(tmp_path / "mlp.pt")  # its own embedder, by name
    held_out = [domain.scenario(1)]
    played, meta = live.steered_meta_game(domain, held_out, backend, steer, games=1, seeds=1)
    assert meta is not None  # meeting pays exactly: every live dialogue has a payoff
    assert len(played) == 4 and all(len(d.messages) >= 2 for d in played)
    assert {x for d in played for x in d.instructions} <= {"Monday", "any"}
    fresh = CachedBackend(model, tmp_path / "cache.sqlite")
    again = live.steered_meta_game(domain, held_out, fresh, steer, games=1, seeds=1)[1]
    assert again == meta and fresh.usage.calls == 0  # the live messages were cached
