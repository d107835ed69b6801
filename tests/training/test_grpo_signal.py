"""A GRPO step says when nothing in it can move the policy: every group's rollouts earned the
same reward, so every advantage is zero (a near-deterministic policy does not explore)."""

from __future__ import annotations

import dataclasses
import json

import torch

from stratagem.training.grpo import signal_tokens
from stratagem.training.packing import TrainSequence
from stratagem.training.sepo import trainer as sepo
from stratagem.training.sepo.trainer import train_sepo


def test_signal_tokens_count_trained_tokens_with_an_advantage():
    seqs = [
        TrainSequence([1, 2, 3, 4], [2, 3], [0.0, 0.0], [0.5, -0.5], [1.0, 1.0]),
        TrainSequence([1, 2, 3], [1, 2], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0]),
        TrainSequence([1, 2, 3], [1, 2], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0]),  # weight 0: not read
    ]
    assert signal_tokens(seqs) == 3
    assert signal_tokens(seqs[1:2]) == 0


def run(tiny_args, out, **overrides) -> tuple[dict, list[str]]:
    lines: list[str] = []
    train_sepo(tiny_args(out, steps=1, checkpoint_every=1, **overrides), log=lines.append)
    entry = next(json.loads(x) for x in lines if x.startswith('{"step": 1'))
    return entry, lines


def test_a_step_without_reward_differences_says_so(tiny_args, tmp_path, monkeypatch):
    real = sepo.step_groups

    def same_rewards(*args, **kwargs):  # what a policy too certain to explore earns
        return [
            dataclasses.replace(g, rewards=torch.ones_like(g.rewards))
            for g in real(*args, **kwargs)
        ]

    monkeypatch.setattr(sepo, "step_groups", same_rewards)
    entry, lines = run(tiny_args, tmp_path / "cold")
    assert entry["signal_tokens"] == 0
    assert entry["grad_norm"] == 0.0  # the KL is 0 at the start, the surrogate has no advantage
    assert any(x.startswith("step 1: no trained token has a non-zero advantage") for x in lines)
    monkeypatch.setattr(sepo, "step_groups", real)
    entry, lines = run(tiny_args, tmp_path / "warm")
    assert entry["signal_tokens"] > 0 and entry["grad_norm"] > 0
    assert not any("no trained token" in x for x in lines)


def test_each_step_releases_the_rollouts_memory_before_its_update(tiny_args, tmp_path, monkeypatch):
    from stratagem.training import grpo

    events: list[str] = []
    real_update = grpo.update

    def update(*args, **kwargs):
        events.append("update")
        return real_update(*args, **kwargs)

    monkeypatch.setattr(grpo, "update", update)
    monkeypatch.setattr(grpo, "release_memory", lambda: events.append("release") or True)
    train_sepo(tiny_args(tmp_path / "run", steps=2, checkpoint_every=2), log=lambda _: None)
    assert events == ["release", "update", "release", "update"]
