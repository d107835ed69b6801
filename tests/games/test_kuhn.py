"""Kuhn poker: the published values (Kuhn 1950; OpenSpiel's kuhn_poker_test) and our derivations."""

from __future__ import annotations

from fractions import Fraction

import pytest

from stratagem.games import get_game
from stratagem.games.kuhn import INFOSETS, game_tree, infoset_observations
from stratagem.metrics.kuhn import exact_exploitability, exact_nash_conv, policy_of
from stratagem.play import EpisodeSpec, play
from stratagem.solvers.best_response import nash_conv
from stratagem.solvers.tree import expected_returns
from stratagem.strategies import get_strategy
from stratagem.tree import uniform_policy


def test_twelve_information_sets():
    assert len(INFOSETS) == 12
    assert set(infoset_observations()) == set(INFOSETS)


def test_first_player_value_under_nash_self_play_is_minus_one_eighteenth():
    policy = policy_of(get_strategy("kuhn", "NashApprox"))
    v0, v1 = expected_returns(game_tree(), policy)
    assert v0 == pytest.approx(-1 / 18, abs=1e-12)
    assert v1 == pytest.approx(1 / 18, abs=1e-12)


def test_nash_approx_is_unexploitable():
    assert exact_exploitability(get_strategy("kuhn", "NashApprox")) < 1e-9


def test_uniform_random_nash_conv_is_eleven_twelfths():
    assert nash_conv(game_tree(), uniform_policy(game_tree())) == pytest.approx(11 / 12)
    assert exact_nash_conv(get_strategy("kuhn", "RandomLegal")) == pytest.approx(11 / 12)


def test_always_bet_exploitability_derived_by_hand():
    # AlwaysBet as first player always bets. The responder calls with K (+2), calls with Q
    # (+2 vs J, −2 vs K: 0 ≥ fold's −1), folds J (−1): (2 + 0 − 1) / 3 = 1/3 per hand.
    as_second = Fraction(2 + 0 - 1, 3)
    # AlwaysBet as second player bets after a pass and calls a bet. The first player bets K (+2);
    # with Q betting gives 0 and pass-call 0 (pass-fold −1); with J pass-fold −1 beats betting's −2.
    as_first = Fraction(2 + 0 - 1, 3)
    game_value_first = Fraction(-1, 18)
    # NashConv = (BR as first − v) + (BR as second + v) = as_first + as_second
    expected = float((as_first - game_value_first + as_second + game_value_first) / 2)
    assert exact_exploitability(get_strategy("kuhn", "AlwaysBet")) == pytest.approx(expected)
    assert expected == pytest.approx(1 / 3)


def test_seats_alternate_first_to_act():
    game = get_game("kuhn")
    trace = next(
        play(
            game,
            [
                EpisodeSpec(
                    "e",
                    0,
                    (get_strategy("kuhn", "RandomLegal"), get_strategy("kuhn", "RandomLegal")),
                )
            ],
        )
    )
    assert [r.info["first"] for r in trace.rounds] == [0, 1, 0, 1, 0, 1]
    assert [r.moves[0][0] for r in trace.rounds] == [0, 1, 0, 1, 0, 1]
    for r in trace.rounds:
        assert r.payoffs[0] == -r.payoffs[1]
        assert abs(r.payoffs[0]) in (1, 2)


def test_text_game_and_tree_agree_on_payoffs():
    """Every terminal payoff the episode engine pays equals the tree's return for that deal."""
    from stratagem.games.kuhn import first_payoff

    game = get_game("kuhn")
    agent = get_strategy("kuhn", "RandomLegal")
    for seed in range(50):
        trace = next(
            play(game, [EpisodeSpec("e", seed, (agent, get_strategy("kuhn", "RandomLegal")))])
        )
        for r in trace.rounds:
            first = r.info["first"]
            cards = r.info["cards"]
            history = tuple(t for _, t in r.moves)
            won = first_payoff(history, cards[first], cards[1 - first])
            assert r.payoffs[first] == won


def test_opponent_card_hidden_until_showdown():
    game = get_game("kuhn")
    state = game.new_episode(4)
    state.apply({0: "BET"})  # hand 1: seat 0 acts first and bets
    state.apply({1: "FOLD"})  # seat 1 folds: no showdown
    assert state.to_act() == (1,)  # hand 2: seat 1 acts first
    obs = state.observe(1)
    assert obs.view.past[0].their_card is None
    assert "opponent showed" not in obs.prompt
    state.apply({1: "PASS"})
    state.apply({0: "PASS"})  # showdown: both cards are shown from now on
    obs = state.observe(0)
    assert obs.view.past[1].their_card == state.cards[1][1]
    assert f"opponent showed {state.cards[1][1]}" in obs.prompt


def test_infoset_probes_are_the_chats_the_seats_see_in_play():
    """The exact-exploitability probe asks a model what it is asked in play (chat style)."""
    from stratagem.game import chat_for
    from stratagem.games.kuhn import infoset_key
    from stratagem.play import play_one

    seen: dict[str, list[dict[str, str]]] = {}

    class Recorder(type(get_strategy("kuhn", "RandomLegal"))):  # type: ignore[misc]
        def act(self, batch):
            for obs in batch:
                if obs.view.hand == 0:
                    seen[infoset_key(obs.view.card, obs.view.history)] = chat_for(obs)
            return super().act(batch)

    game = get_game("kuhn")
    for seed in range(200):
        play_one(game, [Recorder(), Recorder()], seed)
    probes = game.infoset_observations()
    assert set(seen) == set(INFOSETS)
    assert all(chat_for(probes[key]) == chat for key, chat in seen.items())
    single = get_game("kuhn", prompt_style="single").infoset_observations()
    assert all(
        not o.history and o.prompt.startswith("This is the first hand") for o in single.values()
    )
