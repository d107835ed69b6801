"""The PPO clipped surrogate and the one-sided KL on tiny tensors."""

from __future__ import annotations

import math

import pytest
import torch

from stratagem.training.losses import clipped, clipped_surrogate, one_sided_kl, policy_loss


def test_at_ratio_one_the_surrogate_is_the_plain_policy_gradient():
    new = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    adv = torch.tensor([1.5, -2.0, 0.3])
    loss = clipped_surrogate(new, new.detach(), adv, 0.2).sum()
    (grad,) = torch.autograd.grad(loss, new)
    assert torch.allclose(grad, -adv)
    assert loss.item() == pytest.approx(-adv.sum().item())


def test_the_clip_binds_where_the_ratio_left_the_trust_region_in_the_advantage_direction():
    old = torch.zeros(4)
    # ratios 1.5, 1.5, 0.5, 1.1 against advantages +, −, −, +
    new = torch.tensor([math.log(1.5), math.log(1.5), math.log(0.5), math.log(1.1)])
    new.requires_grad_(True)
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0])
    (grad,) = torch.autograd.grad(clipped_surrogate(new, old, adv, 0.2).sum(), new)
    # 1.5 with A > 0: clipped, no gradient; 1.5 with A < 0: unclipped (pessimistic) branch
    # 0.5 with A < 0: clipped; 1.1: inside the region
    assert grad[0] == 0 and grad[2] == 0
    assert grad[1] == pytest.approx(1.5) and grad[3] == pytest.approx(-1.1)
    assert clipped(new, old, adv, 0.2).tolist() == [True, False, True, False]


def test_the_kl_penalty_is_one_sided():
    ref = torch.zeros(2)
    new = torch.tensor([0.3, -0.3], requires_grad=True)
    kl = one_sided_kl(new, ref)
    assert kl.tolist() == pytest.approx([0.3, 0.0])
    (grad,) = torch.autograd.grad(kl.sum(), new)
    assert grad.tolist() == [1.0, 0.0]


def test_policy_loss_weights_and_stats():
    new = torch.tensor([-1.0, -1.0], requires_grad=True)
    old = torch.tensor([-1.0, -1.0 - math.log(2.0)])  # ratio 1 and 2
    ref = torch.tensor([-1.2, -0.5])
    adv = torch.tensor([1.0, 1.0])
    weights = torch.tensor([0.5, 0.25])
    parts = policy_loss(new, old, ref, adv, weights, clip=0.2, beta=0.1)
    surrogate = -(0.5 * 1.0 + 0.25 * 1.2)
    kl = 0.5 * 0.2
    assert parts.loss.item() == pytest.approx(surrogate + 0.1 * kl)
    assert parts.kl == pytest.approx(kl) and parts.clipped == 1 and parts.tokens == 2
    assert parts.ratio_max_dev == pytest.approx(1.0)
