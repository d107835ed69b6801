"""Training maths on tiny tensors: advantages, penalties, chunked log-probs."""

from __future__ import annotations

import pytest
import torch

from stratagem.training.advantages import (
    apply_penalty,
    group_advantages,
    reward_to_go,
    shape_rewards,
)
from stratagem.training.logprobs import chunked_token_logprobs, naive_token_logprobs


def test_reward_to_go():
    r = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
    assert reward_to_go(r).tolist() == [[6.0, 5.0, 3.0], [5.0, 5.0, 5.0]]


def test_round_advantages_match_the_naive_formula():
    torch.manual_seed(0)
    rewards = torch.randn(4, 6)
    adv = group_advantages(rewards, credit="immediate")
    for t in range(6):
        col = rewards[:, t]
        expected = (col - col.mean()) / (col.std(unbiased=False) + 1e-8)
        assert torch.allclose(adv[:, t], expected)
    ret = group_advantages(rewards, credit="return")
    rtg = reward_to_go(rewards)
    assert torch.allclose(
        ret[:, 0], (rtg[:, 0] - rtg[:, 0].mean()) / (rtg[:, 0].std(unbiased=False) + 1e-8)
    )


def test_reward_to_go_credit_fixes_the_tit_for_tat_trap():
    # vs TitForTat: defecting now pays 5 once, then mutual defection (1) instead of cooperation (3)
    cooperate = torch.tensor([3.0, 3.0, 3.0, 3.0])
    defect_first = torch.tensor([5.0, 1.0, 1.0, 1.0])
    rewards = torch.stack([cooperate, defect_first])
    immediate = group_advantages(rewards, credit="immediate")
    to_go = group_advantages(rewards, credit="return")
    assert immediate[1, 0] > immediate[0, 0]  # immediate credit says defecting is better
    assert to_go[1, 0] < to_go[0, 0]  # reward-to-go says it is worse


def test_episode_normalisation_gives_every_round_the_episode_advantage():
    rewards = torch.tensor([[1.0, 1.0], [3.0, 3.0]])
    adv = group_advantages(rewards, normalisation="episode")
    assert torch.allclose(adv, torch.tensor([[-1.0, -1.0], [1.0, 1.0]]), atol=1e-6)


def test_shared_penalty_changes_advantages_by_exactly_zero():
    torch.manual_seed(1)
    rewards = torch.randn(4, 8)
    before = group_advantages(rewards)
    after = group_advantages(apply_penalty(rewards, 3.7, "shared"))
    assert torch.allclose(before, after, atol=1e-6)
    # ... and so the gradient of a surrogate built on them is exactly the same
    logits = torch.randn(4, 8, requires_grad=True)
    grads = []
    for adv in (before, after):
        logits.grad = None
        (-(adv.detach() * logits.log_softmax(0)).mean()).backward()
        grads.append(logits.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_per_rollout_penalty_moves_the_advantages():
    rewards = torch.zeros(3, 4)
    adv = group_advantages(apply_penalty(rewards, torch.tensor([0.0, 1.0, 2.0]), "per_rollout"))
    assert adv[0, 0] > adv[1, 0] > adv[2, 0]
    with pytest.raises(ValueError):
        apply_penalty(rewards, torch.tensor([1.0, 2.0]), "shared")


def test_own_episode_rewards_per_pool():
    own = torch.tensor([[0.0, 1.0]])
    opp = torch.tensor([[5.0, 1.0]])
    greedy = torch.tensor([[True, False]])
    ext = torch.tensor([[0.5, 0.0]])
    kw = {"exploit_weight": 2.4, "collusion_weight": 1.0, "externality_weight": 1.8}
    assert shape_rewards(own, opp, greedy, ext, "exploit", **kw).tolist() == [[-12.0, -0.0]]
    assert shape_rewards(own, opp, greedy, ext, "collusive", **kw).tolist() == [[-1.0, -0.0]]
    assert torch.allclose(
        shape_rewards(own, opp, greedy, ext, "train", **kw), torch.tensor([[-0.9, 1.0]])
    )


@pytest.mark.parametrize("checkpoint", [False, True])
def test_chunked_logprobs_equal_naive_values_and_gradients(checkpoint):
    torch.manual_seed(0)
    hidden = torch.randn(2, 70, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    targets = torch.randint(0, 50, (2, 70))
    naive = naive_token_logprobs(hidden, weight, targets)
    chunked = chunked_token_logprobs(hidden, weight, targets, chunk=32, checkpoint=checkpoint)
    assert torch.allclose(naive, chunked, atol=1e-5)
    g_naive = torch.autograd.grad(naive.sum(), (hidden, weight))
    g_chunk = torch.autograd.grad(chunked.sum(), (hidden, weight))
    for a, b in zip(g_naive, g_chunk, strict=True):
        assert torch.allclose(a, b, atol=1e-4)
