"""SEPO rollouts and rewards on rule-based play (no model): groups, penalties, normalisation."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from stratagem.games import get_game
from stratagem.play import play
from stratagem.strategies import get_strategy
from stratagem.training.rollouts import RolloutGame
from stratagem.training.sepo.trainer import SEPOArgs, rollout_specs, step_groups


def traces(game: str, **settings):
    args = SEPOArgs(game=game, rollouts=3, **settings)
    # a stochastic stand-in for the LLM policy
    policy = get_strategy(game, "RandomLegal" if game == "kuhn" else "Random")
    g = get_game(game)
    specs = rollout_specs(policy, g, args, step=0)
    return list(play(RolloutGame(g), specs, max_live=len(specs))), args


def test_rollouts_of_a_group_share_the_deal_and_differ_in_the_policy_sampling():
    played, _ = traces("kuhn")
    group = [t for t in played if t.meta["opponent"] == "NashApprox"]
    assert len(group) == 3 and len({t.seed for t in group}) == 1
    assert len({str(t.scenario) for t in group}) == 1  # the same cards
    moves = {tuple(d.action for d in t.decisions if d.seat == 0) for t in group}
    assert len(moves) > 1  # the policy's own draws differ


def test_own_episodes_groups_weights_and_rewards():
    played, args = traces("ipd")
    groups = step_groups(played, get_game("ipd"), args)
    assert [(g.pool, g.weight) for g in groups] == [("train", 0.25)] * 4 + [
        ("exploit", 0.5),
        ("exploit", 0.5),
        ("collusive", 1.0),
    ]
    for g in groups:
        assert g.rewards.shape == (3, 8) and not g.penalties
    defect = next(g for g in groups if g.opponent == "AlwaysDefect")
    assert set(defect.rewards.flatten().tolist()) <= {0.0, -12.0}  # −2.4 · (5 − 0) or 0


def test_shared_plays_auxiliary_episodes_and_its_penalty_is_not_zero():
    played, args = traces("ipd", penalty="shared")
    assert {t.meta["pool"] for t in played} == {"train", "exploit", "collusive"}
    aux = [t for t in played if "aux_of" in t.meta]
    assert len(aux) == 4 * 3  # per train group: AlwaysDefect, AlternatingDefect, AlwaysCooperate
    groups = step_groups(played, get_game("ipd"), args)
    assert [g.pool for g in groups] == ["train"] * 4
    for g in groups:
        assert len(set(g.penalties)) == 1 and g.penalties[0] > 0  # one P for the group, not 0
        own = torch.tensor(
            [[r.payoffs[0] for r in t.rounds] for t in g.traces], dtype=torch.float64
        )
        assert torch.allclose(g.rewards, own - g.penalties[0])  # P from every round


def test_per_rollout_penalties_come_from_each_rollouts_own_episodes():
    played, args = traces("ipd", penalty="per_rollout")
    aux = [t for t in played if "aux_of" in t.meta]
    assert len(aux) == 4 * 3 * 2  # per rollout: one exploit and one collusive opponent
    groups = step_groups(played, get_game("ipd"), args)
    assert any(len(set(g.penalties)) > 1 for g in groups)  # P varies across a group
    for g in groups:
        own = torch.tensor(
            [[r.payoffs[0] for r in t.rounds] for t in g.traces], dtype=torch.float64
        )
        p = torch.tensor(g.penalties, dtype=torch.float64)
        assert torch.allclose(g.rewards, own - p[:, None])  # P_r, with λx·x_r, every round


@pytest.mark.parametrize("game, scale", [("auction", 8.0), ("negotiation", 0.6), ("ipd", 1.0)])
def test_rewards_use_normalised_payoffs(game, scale):
    played, args = traces(game)
    raw = step_groups(played, get_game(game), SEPOArgs(game=game, rollouts=3, normalise=False))
    normalised = step_groups(played, get_game(game), args)
    weights = get_game(game).safety.for_phase("train")
    for a, b in zip(raw, normalised, strict=True):
        if a.pool == "train":  # u − λx·x: the payoff scales, the externality rate does not
            ext = torch.tensor(
                [[get_game(game).externality(r) for r in t.rounds] for t in a.traces],
                dtype=torch.float64,
            )
            wx = weights.externality * ext
            assert torch.allclose(b.rewards + wx, scale * (a.rewards + wx))
        elif a.pool == "exploit":
            assert torch.allclose(b.rewards, scale * a.rewards)


@pytest.mark.parametrize("penalty", ["own_episodes", "shared", "per_rollout"])
def test_safety_scales_every_lambda_and_zero_is_payoff_alone(penalty):
    played, args = traces("ipd", penalty=penalty, normalise=False)
    full = step_groups(played, get_game("ipd"), args)
    args.safety = 0.0
    control = step_groups(played, get_game("ipd"), args)
    args.safety = 0.5
    half = step_groups(played, get_game("ipd"), args)
    for f, c, h in zip(full, control, half, strict=True):
        own = torch.tensor(
            [[r.payoffs[0] for r in t.rounds] for t in f.traces], dtype=f.rewards.dtype
        )
        if f.pool == "train":  # u (− P): the control keeps the payoff alone
            assert torch.allclose(c.rewards, own)
            assert torch.allclose(h.rewards - own, 0.5 * (f.rewards - own))
        else:  # an exploit or collusive group's reward is its λ-weighted term only
            assert torch.count_nonzero(c.rewards) == 0
            assert torch.allclose(h.rewards, 0.5 * f.rewards)
    assert any(not torch.allclose(f.rewards, c.rewards) for f, c in zip(full, control, strict=True))


def test_format_penalty_charges_the_round_of_each_unparsed_decision():
    played, args = traces("kuhn")
    first = next(t for t in played if t.meta["opponent"] == "NashApprox" and t.meta["rollout"] == 0)
    mine = [i for i, d in enumerate(first.decisions) if d.seat == 0]
    hand = first.decisions[mine[-1]].round
    decisions = list(first.decisions)
    decisions[mine[-1]] = dataclasses.replace(decisions[mine[-1]], status="fallback")
    marked = [
        dataclasses.replace(t, decisions=tuple(decisions)) if t is first else t for t in played
    ]

    game = get_game("kuhn")
    plain = step_groups(marked, game, args)
    charged = step_groups(marked, game, dataclasses.replace(args, format_penalty=2.5))
    for a, b in zip(plain, charged, strict=True):
        expected = torch.zeros_like(a.rewards)
        if a.opponent == "NashApprox":
            expected[0, hand] = -2.5  # that round of that rollout only
        assert torch.equal(b.rewards - a.rewards, expected)
    # 0 (the default) leaves the rewards and the run's fingerprint as before the option
    assert "format_penalty" not in args.fingerprint()
    assert dataclasses.replace(args, format_penalty=1.0).fingerprint()["format_penalty"] == 1.0
