"""SEPO's exact best-response exploiter (Kuhn): it is the best response (it wins exactly the
exploitability when it plays the real game), it joins the exploit pool of the step's episodes
only when asked, and the option is refused for games without an exact best response."""

from __future__ import annotations

from itertools import permutations

import pytest

from stratagem.errors import ConfigError
from stratagem.games.kuhn import CARDS, HANDS, Kuhn, KuhnState
from stratagem.strategies import get_pools, get_strategy
from stratagem.training.sepo.best_responder import (
    BEST_RESPONSE,
    best_response_to,
    with_best_response,
)
from stratagem.training.sepo.trainer import SEPOArgs, rollout_specs


def payoff_per_hand(responder, policy) -> float:
    """The responder's mean payoff per hand against ``policy`` (seat 0) in the real game, over
    every deal, each played for six hands (three in each position)."""
    total, hands = 0.0, 0
    for deal in permutations(CARDS, 2):
        state = KuhnState(seed=0, cards=(deal,) * HANDS)
        while state.to_act():
            seat = state.to_act()[0]
            agent = responder if seat == 1 else policy
            result = state.apply({seat: agent.act([state.observe(seat)])[0].action})
            if result is not None:
                total += result.payoffs[1]
                hands += 1
    return total / hands


@pytest.mark.parametrize(("name", "gain"), [("AlwaysBet", 1 / 3), ("PotControl", 1 / 6)])
def test_the_responder_wins_the_exact_exploitability_in_the_real_game(name, gain):
    policy = get_strategy("kuhn", name)  # pure, so the deals' mean payoff is exact
    responder, exploitability = best_response_to(policy, Kuhn())
    assert exploitability == pytest.approx(gain, abs=1e-12)
    assert payoff_per_hand(responder, policy) == pytest.approx(gain, abs=1e-12)


def test_against_always_bet_it_folds_j_and_calls_q_and_k_facing_a_bet():
    responder, _ = best_response_to(get_strategy("kuhn", "AlwaysBet"), Kuhn())
    facing_bet = {k: max(v, key=v.get) for k, v in responder.policy.items() if k.endswith(":B")}
    assert facing_bet == {"J:B": "FOLD", "Q:B": "CALL", "K:B": "CALL"}


def test_every_information_set_gets_a_distribution_over_its_legal_actions():
    responder, _ = best_response_to(get_strategy("kuhn", "NashApprox"), Kuhn())
    for obs in Kuhn().infoset_observations().values():
        probs = responder.probabilities(obs.view)
        assert set(probs) == set(obs.view.legal) and sum(probs.values()) == 1.0


def test_the_responder_plays_in_the_exploit_pool_only_when_asked():
    game = Kuhn()
    learner = get_strategy("kuhn", "NashApprox")
    responder, _ = best_response_to(learner, game)
    args = SEPOArgs(game="kuhn", rollouts=2)
    plain = rollout_specs(learner, game, args, step=0)
    assert BEST_RESPONSE not in {s.meta["opponent"] for s in plain}
    pools = with_best_response(get_pools("kuhn"))
    assert pools.exploit == ("AlwaysBet", "BluffHeavy", BEST_RESPONSE)
    specs = rollout_specs(learner, game, args, 0, pools, {BEST_RESPONSE: responder})
    against = [s for s in specs if s.meta["opponent"] == BEST_RESPONSE]
    assert len(against) == 2 and all(s.meta["pool"] == "exploit" for s in against)
    assert all(s.agents[1] is responder for s in against)
    assert len(specs) == len(plain) + 2


def test_the_option_is_refused_where_no_exact_best_response_exists():
    with pytest.raises(ConfigError, match="--exploit-best-response"):
        SEPOArgs(game="ipd", exploit_best_response=True).check()
    with pytest.raises(ConfigError, match="own_episodes"):  # no gradient from exploit episodes
        SEPOArgs(penalty="per_rollout", exploit_best_response=True).check()
    assert "exploit_best_response" not in SEPOArgs().fingerprint()  # old runs resume
    assert SEPOArgs(exploit_best_response=True).fingerprint()["exploit_best_response"] is True
