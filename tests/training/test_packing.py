"""Multi-turn episodes read once: rollouts continue each chat from its exact tokens (and KV),
and a packed episode gives the same log-probs and gradients as one sequence per decision."""

from __future__ import annotations

import pytest
import torch

from stratagem.training.logprobs import sequence_logprobs
from stratagem.training.packing import Turn, pack, per_decision
from stratagem.training.policy import load_policy
from stratagem.training.sepo import trainer as sepo

pytestmark = pytest.mark.slow  # the tiny LM: seconds


@pytest.fixture(scope="module")
def rollouts(tiny_model, tmp_path_factory):
    from stratagem.agents.llm import LLMAgent
    from stratagem.backends.base import Sampling
    from stratagem.backends.hf import HFBackend
    from stratagem.games import get_game

    args = sepo.SEPOArgs(
        game="ipd",
        model=tiny_model,
        out=tmp_path_factory.mktemp("run"),
        rollouts=2,
        max_new_tokens=6,
        lora_rank=4,
        lora_alpha=8,
        lora_dropout=0.0,
    ).resolved()
    game = get_game("ipd")
    policy, tokenizer = load_policy(args)
    policy.eval()
    backend = HFBackend.from_model(policy, tokenizer, "tiny", prefix_reuse=True)
    agent = LLMAgent(backend, game, Sampling(0.8, 1.0, 6), fallback="sample")
    traces = sepo.rollout(agent, args, step=0)
    turns = sepo.turns_from(sepo.step_groups(traces, game, args), game, args)
    return args, policy, traces, turns


def test_a_rollout_continues_each_chat_from_its_own_tokens_and_kv(rollouts):
    _, _, traces, _ = rollouts
    for trace in traces[:6]:
        mine = [d for d in trace.decisions if d.seat == 0]
        assert len(mine) == 8
        for before, after in zip(mine, mine[1:], strict=False):
            done = before.info["prompt_ids"] + before.info["token_ids"]
            assert after.info["prompt_ids"][: len(done)] == done
        # with the chat's KV kept, a later round computes only its new tokens
        first, last = mine[0].info, mine[-1].info
        assert last["prompt_tokens"] > 3 * first["prompt_tokens"] // 2
        assert last["prefill_tokens"] < first["prompt_tokens"] // 2


def test_packing_puts_each_episode_into_one_sequence(rollouts):
    _, _, traces, turns = rollouts
    packed = pack(turns)
    single = per_decision(turns)
    assert len(packed) == len(traces) and len(single) == len(turns) == 8 * len(traces)
    assert sum(len(s.positions) for s in packed) == sum(len(s.positions) for s in single)
    # every token read once: packed tokens are a fraction of the per-decision tokens
    assert sum(len(s.ids) for s in packed) < sum(len(s.ids) for s in single) / 3
    for name in ("old", "advantages", "weights"):
        assert sum((getattr(s, name) for s in packed), []) == sum(
            (getattr(s, name) for s in single), []
        )


def test_packed_logprobs_equal_per_decision_values_and_gradients(rollouts):
    args, policy, _, turns = rollouts
    turns = turns[:16]  # two episodes
    params = [p for p in policy.parameters() if p.requires_grad]
    with torch.no_grad():  # a non-zero adapter, so its gradients are not trivially zero
        for p in params:
            p.normal_(0, 0.05)

    def run(sequences):
        policy.zero_grad(set_to_none=True)
        values = []
        for s in sequences:
            lp = sequence_logprobs(policy, s.ids, s.positions, temperature=0.8)
            (lp * torch.tensor(s.weights)).sum().backward()
            values.append(lp.detach())
        return torch.cat(values), [p.grad.clone() for p in params]

    packed, g_packed = run(pack(turns))
    single, g_single = run(per_decision(turns))
    assert torch.allclose(packed, single, atol=1e-5)
    for a, b in zip(g_packed, g_single, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)
    assert any(g.abs().sum() > 0 for g in g_packed)


def test_a_prompt_that_does_not_continue_starts_a_new_sequence():
    def turn(episode, prompt, tokens):
        return Turn(episode, prompt, tokens, [-1.0] * len(tokens), 1.0, 0.5)

    turns = [
        turn("a", [1, 2], [3]),
        turn("a", [1, 2, 3, 4], [5, 6]),  # continues
        turn("a", [1, 9, 3, 4, 5, 6, 7], [8]),  # a rewritten earlier turn
        turn("b", [1, 2], [3]),  # another episode
    ]
    packed = pack(turns)
    assert [s.ids for s in packed] == [[1, 2, 3, 4, 5, 6], [1, 9, 3, 4, 5, 6, 7, 8], [1, 2, 3]]
    assert packed[0].positions == [2, 4, 5] and packed[0].weights == [0.5, 0.25, 0.25]
