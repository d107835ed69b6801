"""Leduc's strategies: the shipped equilibrium is a fresh CFR+ solve, the exploit pool beats loose
play, and every strategy's exact exploitability."""

from __future__ import annotations

import pytest

from stratagem.games import get_game
from stratagem.metrics.kuhn import exact_exploitability, policy_of
from stratagem.solvers.best_response import exploitability
from stratagem.solvers.shipped import LEDUC_ITERATIONS, solve_leduc
from stratagem.solvers.tree import expected_returns
from stratagem.strategies import get_pools, get_strategy, sft_mixture, strategies
from stratagem.strategies.leduc import equilibrium

GAME = get_game("leduc")
ROOT = GAME.game_tree()


def policy(name: str) -> dict[str, dict[str, float]]:
    return policy_of(get_strategy("leduc", name), GAME)


def payoff(a: str, b: str) -> float:
    """``a``'s exact mean chips per hand against ``b``, over both positions."""
    pa, pb = policy(a), policy(b)

    def seated(first, second):  # position 0's information sets from ``first``
        return {
            k: (first if len(k.split(":")[1].split("/")[-1]) % 2 == 0 else second)[k] for k in pa
        }

    return (
        expected_returns(ROOT, seated(pa, pb))[0] + expected_returns(ROOT, seated(pb, pa))[1]
    ) / 2


def test_the_shipped_equilibrium_is_a_fresh_cfr_plus_solve():
    fresh = solve_leduc()
    shipped = equilibrium()
    assert fresh["iterations"] == LEDUC_ITERATIONS == 3000 and fresh["algorithm"] == "cfr+"
    assert set(shipped) == set(fresh["policy"]) and len(shipped) == 936
    for key, dist in fresh["policy"].items():
        assert shipped[key] == pytest.approx(dist, abs=1e-12), key
    assert fresh["exploitability"] == pytest.approx(3.705002936407742e-05, rel=1e-9)
    # the game value of Leduc for the first to act, -0.0856 (OpenSpiel, Southey et al.)
    assert fresh["value"][0] == pytest.approx(-0.085605, abs=1e-5)


def test_leduc_cfr_plays_the_shipped_policy_and_is_nearly_unexploitable():
    played = policy("LeducCFR")
    assert set(played) == set(equilibrium())
    assert all(played[k] == pytest.approx(d, abs=1e-15) for k, d in equilibrium().items())
    assert exact_exploitability(get_strategy("leduc", "LeducCFR"), GAME) == pytest.approx(
        3.705002936407742e-05, rel=1e-9
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RandomLegal", 1709 / 720),  # OpenSpiel's NashConv of uniform random, 4.7472…, halved
        ("TightPassive", 8 / 15),
        ("LooseAggressive", 23 / 16),
        ("TightAggressive", 14 / 15),
        ("CheckRaiser", 8 / 15),
        ("AlwaysRaise", 71 / 30),
        ("AggressiveStation", 9 / 5),
        ("PotControl", 37 / 60),
    ],
)
def test_exact_exploitability_of_each_rule_based_strategy(name, value):
    assert exploitability(ROOT, policy(name)) == pytest.approx(value, abs=1e-12)


@pytest.mark.parametrize(
    ("exploiter", "loose", "chips"),
    [
        ("TightAggressive", "LooseAggressive", 1 / 4),
        ("TightAggressive", "RandomLegal", 751 / 720),
        ("CheckRaiser", "LooseAggressive", 9 / 20),
        ("CheckRaiser", "RandomLegal", 7 / 12),
    ],
)
def test_the_exploit_pool_wins_against_loose_play(exploiter, loose, chips):
    assert exploiter in get_pools("leduc").exploit
    assert payoff(exploiter, loose) == pytest.approx(chips, abs=1e-12)
    assert payoff(loose, exploiter) == pytest.approx(-chips, abs=1e-12)  # zero-sum


def test_no_pool_member_beats_the_equilibrium():
    pools = get_pools("leduc")
    for name in {n for _, members in pools.items() for n in members} - {"LeducCFR"}:
        assert payoff(name, "LeducCFR") < 0, name


def test_two_strategies_that_never_raise_first_only_check_down():
    """CheckRaiser raises only when raised and TightPassive never raises: every hand is checked
    to a showdown for the antes, and the deal is symmetric, so neither wins."""
    assert payoff("CheckRaiser", "TightPassive") == pytest.approx(0.0, abs=1e-15)


def test_pools_and_mixture_name_registered_strategies():
    names = set(strategies("leduc").names())
    pools = get_pools("leduc")
    assert pools.train == ("LeducCFR", "TightPassive", "LooseAggressive")
    assert pools.exploit == ("TightAggressive", "CheckRaiser") and pools.collusive == ()
    assert {n for _, m in pools.items() for n in m} <= names
    assert sum(sft_mixture("leduc").values()) == pytest.approx(1.0)
