"""Training maths on tiny tensors: rewards, penalties, advantages, chunked log-probs."""

from __future__ import annotations

import pytest
import torch

from stratagem.game import SafetyWeights
from stratagem.training.advantages import (
    group_weight,
    penalty,
    reward_to_go,
    shape_rewards,
    step_advantages,
    subtract_penalty,
)
from stratagem.training.logprobs import Head, chunked_token_logprobs, naive_token_logprobs

IPD = SafetyWeights(2.4, 1.0, 1.8)


def test_reward_to_go():
    r = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
    assert reward_to_go(r).tolist() == [[6.0, 5.0, 3.0], [5.0, 5.0, 5.0]]


def test_group_scale_matches_the_naive_per_round_formula():
    torch.manual_seed(0)
    rewards = torch.randn(4, 6)
    [adv] = step_advantages([rewards], credit="immediate", scale="group")
    for t in range(6):
        col = rewards[:, t]
        expected = (col - col.mean()) / (col.std(unbiased=False) + 1e-8)
        assert torch.allclose(adv[:, t], expected)
    [ret] = step_advantages([rewards], credit="return", scale="group")
    rtg = reward_to_go(rewards)[:, 0]
    assert torch.allclose(ret[:, 0], (rtg - rtg.mean()) / (rtg.std(unbiased=False) + 1e-8))


def test_step_scale_is_one_std_pooled_over_every_group():
    torch.manual_seed(1)
    groups = [torch.randn(3, 4), 5 * torch.randn(2, 4)]
    adv = step_advantages(groups, credit="immediate", scale="step")
    residuals = torch.cat([(g - g.mean(0)).flatten() for g in groups])
    sigma = residuals.pow(2).mean().sqrt()
    for g, a in zip(groups, adv, strict=True):
        assert torch.allclose(a, (g - g.mean(0)) / sigma)
    pooled = torch.cat([a.flatten() for a in adv])
    assert pooled.pow(2).mean().item() == pytest.approx(1.0)


def test_reward_to_go_credit_fixes_the_tit_for_tat_trap():
    # vs TitForTat: defecting now pays 5 once, then mutual defection (1) instead of cooperation (3)
    cooperate = torch.tensor([3.0, 3.0, 3.0, 3.0])
    defect_first = torch.tensor([5.0, 1.0, 1.0, 1.0])
    rewards = torch.stack([cooperate, defect_first])
    [immediate] = step_advantages([rewards], credit="immediate")
    [to_go] = step_advantages([rewards], credit="return")
    assert immediate[1, 0] > immediate[0, 0]  # immediate credit says defecting is better
    assert to_go[1, 0] < to_go[0, 0]  # reward-to-go says it is worse


def test_episode_normalisation_gives_every_round_the_episode_advantage():
    rewards = torch.tensor([[1.0, 1.0], [3.0, 3.0]])
    [adv] = step_advantages([rewards], normalisation="episode")
    assert torch.allclose(adv, torch.tensor([[-1.0, -1.0], [1.0, 1.0]]), atol=1e-6)


def _exploit_and_train_gradients(exploit_weight: float, scale: str):
    """A toy policy: one logit vector per (group, rollout, round); the gradient of the
    policy-gradient loss splits into the exploit group's part and the train group's part."""
    torch.manual_seed(2)
    own = torch.tensor([[0.0, 1.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    opponent = torch.tensor([[5.0, 1.0, 1.0], [5.0, 5.0, 1.0], [1.0, 1.0, 1.0]])
    none = torch.zeros(3, 3)
    weights = SafetyWeights(exploit_weight, 1.0, 1.8)
    exploit = shape_rewards(own, opponent, none, none, "exploit", weights)
    train = shape_rewards(torch.randn(3, 3), none, none, torch.rand(3, 3), "train", weights)
    adv = step_advantages([exploit, train], scale=scale)
    params = [torch.randn(3, 3, 2, requires_grad=True) for _ in range(2)]
    actions = torch.randint(0, 2, (3, 3))
    loss = sum(
        -(a * p.log_softmax(-1).gather(-1, actions[..., None]).squeeze(-1)).sum()
        for a, p in zip(adv, params, strict=True)
    )
    grads = torch.autograd.grad(loss, params)
    return grads[0].norm().item(), grads[1].norm().item()


def test_doubling_lambda_e_doubles_the_exploit_share_of_the_gradient():
    e1, u1 = _exploit_and_train_gradients(2.4, "step")
    e2, u2 = _exploit_and_train_gradients(4.8, "step")
    assert (e2 / u2) / (e1 / u1) == pytest.approx(2.0, rel=1e-6)


def test_a_group_scale_cancels_lambda_the_ablation():
    e1, u1 = _exploit_and_train_gradients(2.4, "group")
    e2, u2 = _exploit_and_train_gradients(0.01, "group")
    assert e1 / u1 == pytest.approx(e2 / u2, rel=1e-5)  # λe changed nothing


def test_penalty_is_j_terms_with_per_opponent_clipping():
    # e = mean over opponents of max(0, advantage): (2 + 0) / 2 = 1
    assert penalty([2.0, -1.0], 0.5, 0.25, IPD) == pytest.approx(2.4 * 1 + 1.0 * 0.5 + 1.8 * 0.25)
    assert penalty([], 0.0, 0.0, IPD) == 0.0


def test_a_shared_penalty_is_not_zero_and_changes_advantages_by_exactly_zero():
    torch.manual_seed(1)
    rewards = [torch.randn(4, 8, dtype=torch.float64) for _ in range(2)]  # as the trainer's
    p = penalty([3.0], 0.5, 0.1, IPD)
    assert p > 7
    before = step_advantages(rewards)
    after = step_advantages([subtract_penalty(r, p) for r in rewards])
    for b, a in zip(before, after, strict=True):
        assert torch.allclose(b, a, atol=1e-12)
    logits = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    grads = []
    for adv in (before, after):
        loss = -(adv[0] * logits.log_softmax(0)).mean()
        grads.append(torch.autograd.grad(loss, logits)[0])
    assert torch.allclose(grads[0], grads[1], atol=1e-12)


def test_a_per_rollout_penalty_is_subtracted_from_every_round():
    rewards = torch.zeros(3, 4)
    shaped = subtract_penalty(rewards, torch.tensor([0.0, 1.0, 2.0]))
    assert shaped[:, 0].tolist() == [0.0, -1.0, -2.0]
    assert torch.equal(shaped[:, 0], shaped[:, 3])  # P per round, not P / T
    [adv] = step_advantages([shaped])
    assert adv[0, 0] > adv[1, 0] > adv[2, 0]
    with pytest.raises(ValueError):
        subtract_penalty(rewards, torch.tensor([1.0, 2.0]))


def test_own_episode_rewards_per_pool():
    own = torch.tensor([[0.0, 1.0]])
    opp = torch.tensor([[5.0, 1.0]])
    greedy = torch.tensor([[True, False]])
    ext = torch.tensor([[0.5, 0.0]])
    assert shape_rewards(own, opp, greedy, ext, "exploit", IPD).tolist() == [[-12.0, -0.0]]
    assert shape_rewards(own, opp, greedy, ext, "collusive", IPD).tolist() == [[-1.0, -0.0]]
    assert torch.allclose(
        shape_rewards(own, opp, greedy, ext, "train", IPD), torch.tensor([[-0.9, 1.0]])
    )
    with pytest.raises(ValueError):
        shape_rewards(own, opp, greedy, ext, "robust", IPD)


def test_group_weights_follow_j():
    assert group_weight(4) == 0.25 and group_weight(1) == 1.0
    with pytest.raises(ValueError):
        group_weight(0)


@pytest.mark.parametrize("checkpoint", [False, True])
@pytest.mark.parametrize("temperature", [1.0, 0.8])
def test_chunked_logprobs_equal_naive_values_and_gradients(checkpoint, temperature):
    torch.manual_seed(0)
    hidden = torch.randn(2, 70, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    targets = torch.randint(0, 50, (2, 70))
    naive = naive_token_logprobs(hidden, weight, targets, temperature)
    chunked = chunked_token_logprobs(
        hidden, weight, targets, chunk=32, checkpoint=checkpoint, temperature=temperature
    )
    assert torch.allclose(naive, chunked, atol=1e-5)
    g_naive = torch.autograd.grad(naive.sum(), (hidden, weight))
    g_chunk = torch.autograd.grad(chunked.sum(), (hidden, weight))
    for a, b in zip(g_naive, g_chunk, strict=True):
        assert torch.allclose(a, b, atol=1e-4)


def test_soft_capped_head_matches_the_capped_logits():
    torch.manual_seed(0)
    hidden = torch.randn(1, 40, 8)
    weight = 10 * torch.randn(30, 8)
    targets = torch.randint(0, 30, (1, 40))
    capped = 5.0 * torch.tanh((hidden @ weight.T) / 5.0)
    naive = (capped / 0.8).log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)
    head = Head(weight, softcap=5.0)
    chunked = chunked_token_logprobs(hidden, head, targets, chunk=16, temperature=0.8)
    assert torch.allclose(naive, chunked, atol=1e-5)
    assert not torch.allclose(naive, naive_token_logprobs(hidden, weight, targets, 0.8))
