import pytest

from stratagem.game import RoundResult
from stratagem.games import get_game
from stratagem.games.auction import Bid, inefficiency, round_payoffs


def test_tie_splits_the_surplus():
    assert round_payoffs((4, 2), (Bid.MEDIUM, Bid.MEDIUM)) == (1.0, 0.0)
    assert round_payoffs((4, 4), (Bid.HIGH, Bid.HIGH)) == (0.5, 0.5)
    assert round_payoffs((2, 2), (Bid.HIGH, Bid.HIGH)) == (-0.5, -0.5)


def test_higher_bid_wins_value_minus_bid():
    assert round_payoffs((4, 2), (Bid.HIGH, Bid.MEDIUM)) == (1.0, 0.0)
    assert round_payoffs((2, 4), (Bid.HIGH, Bid.LOW)) == (-1.0, 0.0)
    assert round_payoffs((2, 4), (Bid.LOW, Bid.MEDIUM)) == (0.0, 2.0)


def test_allocative_inefficiency_on_hand_built_rounds():
    game = get_game("auction")
    wrong_winner = RoundResult(0, ((0, "HIGH"), (1, "LOW")), (-1.0, 0.0), {"values": [2, 4]})
    assert game.externality(wrong_winner) == pytest.approx((4 - 2) / 4)
    tie = RoundResult(0, ((0, "MEDIUM"), (1, "MEDIUM")), (0.0, 1.0), {"values": [2, 4]})
    assert game.externality(tie) == pytest.approx((4 - 3) / 4)  # winner's value = mean of 2, 4
    right_winner = RoundResult(0, ((0, "LOW"), (1, "HIGH")), (0.0, 1.0), {"values": [2, 4]})
    assert game.externality(right_winner) == 0.0
    assert inefficiency((4, 4), (Bid.LOW, Bid.HIGH)) == 0.0


def test_collusion_is_both_bidding_low():
    game = get_game("auction")
    assert game.collusive_act(RoundResult(0, ((0, "LOW"), (1, "LOW")), (0.5, 0.5)), 0)
    assert not game.collusive_act(RoundResult(0, ((0, "MEDIUM"), (1, "LOW")), (0.0, 0.0)), 0)


def test_values_are_drawn_from_two_and_four_and_vary():
    game = get_game("auction")
    values = {v for seed in range(20) for pair in game.new_episode(seed).deal for v in pair}
    assert values == {2, 4}
