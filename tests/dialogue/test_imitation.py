"""Imitation of CFR policies: the loss, the loop, the data set, the 2×2 meta-game, the command."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from stratagem.backends.cache import CachedBackend
from stratagem.backends.scripted import ScriptedBackend
from stratagem.cli.main import app
from stratagem.games.dialogue import get_domain
from stratagem.solvers.dialogue import DialogueTree, expand, fixed_policy
from stratagem.solvers.dialogue import setup as dialogue_setup
from stratagem.training import imitation
from stratagem.training.imitation import (
    Args,
    Dataset,
    build_dataset,
    cfr_policies,
    meta_game,
    soft_cross_entropy,
    steered_policy,
    train,
)

from .conftest import SeededScript, meeting_script


def fake_embed(texts):
    """Bag of hashed words, unit norm: deterministic and instant."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.split():
            out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_soft_cross_entropy_is_the_naive_formula_and_is_least_at_the_target():
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]])
    targets = torch.tensor([[0.2, 0.8, 0.0], [0.0, 0.5, 0.5]])
    naive = 0.0
    for row, t in zip(logits.tolist(), targets.tolist(), strict=True):
        z = np.log(np.sum(np.exp(row)))
        naive += -sum(ti * (ri - z) for ri, ti in zip(row, t, strict=True))
    assert float(soft_cross_entropy(logits, targets)) == pytest.approx(naive / 2)
    at_target = torch.log(torch.tensor([[0.2, 0.8, 1e-9]]))
    away = torch.tensor([[0.0, 0.0, 0.0]])
    t = torch.tensor([[0.2, 0.8, 0.0]])
    assert soft_cross_entropy(at_target, t) < soft_cross_entropy(away, t)


def test_training_loop_fits_a_separable_toy_set():
    x = np.eye(4, dtype=np.float32)
    data = Dataset(("a", "b"), ["w", "x", "y", "z"], [[1, 0], [1, 0], [0, 1], [0.5, 0.5]], x)
    model, losses = train(data, Args(hidden=16, steps=400, batch_size=8, lr=1e-2))
    probs = torch.softmax(model(torch.as_tensor(x)), -1).detach().numpy()
    assert probs[0, 0] > 0.95 and probs[2, 1] > 0.95 and abs(probs[3, 0] - 0.5) < 0.1
    assert np.mean(losses[-20:]) < np.mean(losses[:20])
    again, _ = train(data, Args(hidden=16, steps=400, batch_size=8, lr=1e-2))
    assert torch.equal(again[0].weight, model[0].weight)  # seeded: same weights


def test_meta_game_steered_vs_unsteered_by_hand(hand_scenario):
    # the hand-computed meeting game of test_tree.py, "steered" by its equilibrium (Tuesday):
    # rows: Alice (seat 0) steered / unsteered; columns: Bob (seat 1)
    domain = get_domain("meeting", ("Monday", "Tuesday", "any"))
    tree = DialogueTree(domain, hand_scenario, CachedBackend(SeededScript(meeting_script)))
    report = meta_game([tree], [fixed_policy(tree.root, "Tuesday")])
    assert report.row == ((4.0, 6.0), (0.0, 4.0))
    assert report.col == ((6.0, 4.0), (0.0, 1.0))
    # both steered is the only welfare-maximising CCE: Bob gains 6 − 4 by steering against SU
    assert report.steered_mass == pytest.approx((1.0, 1.0))


def test_cfr_targets_run_every_iteration(hand_scenario):
    # regression: the targets came from solve(..., points=1), which stops at its one checkpoint,
    # iteration 1, so every target was uniform; the hand game's equilibrium is Tuesday throughout
    from stratagem.solvers.cfr import solve

    domain = get_domain("meeting", ("Monday", "Tuesday", "any"))
    tree = DialogueTree(domain, hand_scenario, CachedBackend(SeededScript(meeting_script)))
    (policy,) = cfr_policies([tree], 2000)
    assert len(policy) == 2  # Bob's opening reply; Alice after a Tuesday proposal
    for dist in policy.values():
        assert dist["Tuesday"] == pytest.approx(1.0, abs=1e-3)
    assert cfr_policies([tree], 300)[0] == solve(tree.root, "cfr+", 300).policy


def fruit_trees(n):
    domain = get_domain("fruit", ("calm", "assertive", "any"))

    def script(chat):
        return "Fine.\nACCEPT" if "calm" in chat[-1]["content"] else "Hmm, no."

    cached = CachedBackend(ScriptedBackend(script))
    trees = [DialogueTree(domain, domain.scenario(s), cached, replies=2, seeds=1) for s in range(n)]
    expand(trees)
    return trees


def test_dataset_and_steered_policy_cover_every_information_state():
    trees = fruit_trees(3)
    policies = cfr_policies(trees, 200)
    data = build_dataset(trees[:2], policies[:2], fake_embed)
    assert data.instructions == ("calm", "assertive", "any")
    assert len(data.texts) == sum(len(p) for p in policies[:2]) == data.embeddings.shape[0]
    assert all(abs(sum(t) - 1) < 1e-9 for t in data.targets)
    assert "Your earlier instructions" in data.texts[0]
    model, _ = train(data, Args(hidden=8, steps=50))
    steered = steered_policy(trees[2], model, fake_embed, data.instructions)
    assert set(steered) == set(policies[2])
    assert all(abs(sum(d.values()) - 1) < 1e-6 for d in steered.values())


def test_imitate_command(monkeypatch, tmp_path):
    def script(chat):
        return "Fine.\nACCEPT" if "calm" in chat[-1]["content"] else "Hmm, no."

    backend = ScriptedBackend(script)
    monkeypatch.setattr(dialogue_setup, "make_backend", lambda opts: backend)
    monkeypatch.setattr(imitation, "load_embedder", lambda: fake_embed)
    out = tmp_path / "imitate"
    args = [
        "imitate",
        "--game",
        "fruit",
        "--instructions",
        "calm,assertive,any",
        "--train",
        "3",
        "--test",
        "2",
        "--seeds",
        "1",
        "--steps",
        "100",
        "--iterations",
        "100",
        "--cache",
        str(tmp_path / "c.sqlite"),
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_scenarios"] == 3 and summary["examples"] > 0
    assert all(0 <= m <= 1 for m in summary["steered_mass"])
    assert (out / "mlp.pt").exists() and (out / "loss.png").exists()
    assert "CCE mass on the steered LLM" in (out / "table.md").read_text()
    result = CliRunner().invoke(app, ["imitate", "--game", "kuhn", "--out", str(out)])
    assert "needs a dialogue game" in str(result.exception)


@pytest.mark.slow
def test_minilm_embeds_offline_from_the_wheel():
    embed = imitation.load_embedder()
    vectors = embed(["I will trade two kiwis.", "Two kiwis for trade.", "The motion is false."])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
