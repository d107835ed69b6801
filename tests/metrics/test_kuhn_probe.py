"""The exact-exploitability probe asks what play asks, at the temperature the agent plays, and
reads every hand of a match as its own policy."""

from __future__ import annotations

import math
import re

import pytest

from stratagem.agents.llm import LLMAgent, tempered
from stratagem.backends.base import Sampling
from stratagem.backends.scripted import ScriptedBackend
from stratagem.game import chat_for
from stratagem.games.kuhn import CARDS, HANDS, LEGAL, Kuhn, game_tree, infoset_key
from stratagem.metrics.kuhn import exploitability_by_hand, policy_of
from stratagem.solvers.best_response import exploitability
from stratagem.strategies import get_strategy

RANDOM = 0.4583333333333333  # a uniform random policy's exact exploitability (11/24)


def test_tempered_distributions():
    dist = {"PASS": 0.75, "BET": 0.25}
    assert tempered(dist, 1.0) == dist
    assert tempered(dist, 0.0) == {"PASS": 1.0, "BET": 0.0}
    assert tempered({"A": 0.5, "B": 0.5, "C": 0.0}, 0.0) == {"A": 0.5, "B": 0.5, "C": 0.0}
    half = tempered(dist, 0.5)  # p ** 2, renormalised: 0.5625 / 0.625 and 0.0625 / 0.625
    assert half["PASS"] == pytest.approx(0.9) and half["BET"] == pytest.approx(0.1)
    tiny = tempered({"A": 1e-200, "B": 1e-201}, 1e-3)  # no 0 / 0 in linear space
    assert tiny["A"] == pytest.approx(1.0) and math.isfinite(tiny["B"])


def test_probe_asks_the_chat_play_shows():
    seen = []

    def probs(chat, choices):
        seen.append(chat)
        return {c: 1 / len(choices) for c in choices}

    agent = LLMAgent(ScriptedBackend([], probs=probs), Kuhn(), Sampling(temperature=1.0))
    observations = Kuhn().infoset_observations()
    policy_of(agent, Kuhn())
    assert seen == [chat_for(o) for o in observations.values()]


def test_greedy_agents_are_probed_as_the_pure_policy_they_play():
    def probs(chat, choices):
        return {c: (0.6 if i == 0 else 0.4) for i, c in enumerate(choices)}

    greedy = LLMAgent(ScriptedBackend([], probs=probs), Kuhn())  # temperature 0
    policy = policy_of(greedy, Kuhn())
    assert all(max(d.values()) == 1.0 for d in policy.values())
    assert policy["K:B"] == {"FOLD": 1.0, "CALL": 0.0}


def test_rule_based_strategies_have_one_policy_in_every_hand():
    nash = get_strategy("kuhn", "NashApprox")
    for name, value in (("AlwaysBet", 1 / 3), ("RandomLegal", RANDOM), ("PotControl", 1 / 6)):
        result = exploitability_by_hand(get_strategy("kuhn", name), nash, seed=3)
        assert result.by_hand == pytest.approx((value,) * HANDS, abs=1e-12)


def _current_hand(chat) -> int:
    hands = [int(m) for msg in chat for m in re.findall(r"Hand (\d) of 6", msg["content"])]
    return hands[-1]


def _first_option(chat) -> str:
    return re.findall(r"Your options: (\w+)", chat[-1]["content"])[-1]


def test_each_later_hand_is_probed_with_the_match_behind_it():
    def probs(chat, choices):  # always gives up in hand 4 only, uniform elsewhere
        if _current_hand(chat) == 4:
            return {c: float(c in ("PASS", "FOLD")) for c in choices}
        return {c: 1 / len(choices) for c in choices}

    backend = ScriptedBackend(_first_option, probs=probs)
    agent = LLMAgent(backend, Kuhn(), Sampling(temperature=1.0))
    result = exploitability_by_hand(agent, get_strategy("kuhn", "NashApprox"), seed=7)
    gives_up = {
        infoset_key(card, h): {str(a): float(str(a) in ("PASS", "FOLD")) for a in legal}
        for h, legal in LEGAL.items()
        for card in CARDS
    }
    expected = exploitability(game_tree(), gives_up)
    assert expected == pytest.approx(1.0)  # a best responder bets and wins the ante every hand
    assert result.by_hand == pytest.approx((RANDOM, RANDOM, RANDOM, expected, RANDOM, RANDOM))
    assert (result.worst, result.worst_hand) == (pytest.approx(expected), 4)
    assert set(result.policies[3]) == {infoset_key(c, h) for h in LEGAL for c in CARDS}
    # one batched probe: the first hand's 12 information sets and 12 for each later hand
    assert backend.prob_calls == [12 * HANDS]


def test_a_later_hands_chat_opens_with_the_match_the_seat_played():
    game = Kuhn()
    agent = LLMAgent(ScriptedBackend(_first_option), game, Sampling(temperature=1.0))
    from stratagem.metrics.kuhn import _match_prefixes

    prefixes = _match_prefixes(game, agent, get_strategy("kuhn", "NashApprox"), seed=7)
    prefix = prefixes[1][3]  # seat 1 at the start of hand 4: it acts first there
    assert prefix.hand == 3 and len(prefix.past) == 3
    observations = game.infoset_observations(prefix)
    assert set(observations) == {infoset_key(c, h) for h in ((), ("PASS", "BET")) for c in CARDS}
    for obs in observations.values():
        assert obs.seat == 1 and obs.round == 3
        assert obs.history[: len(prefix.chat)] == prefix.chat
    opening = observations["K:"].prompt
    assert "Hand 3 ended" in opening and "Hand 4 of 6" in opening
