from stratagem.games import get_game
from stratagem.games.multi_issue import fits, worth
from stratagem.games.negotiation import round_payoffs
from stratagem.play import play_one
from stratagem.strategies import get_strategy


def test_v1_breakdown_when_demands_exceed_the_pie():
    assert round_payoffs(5, 5) == (5.0, 5.0)
    assert round_payoffs(4, 6) == (4.0, 6.0)
    assert round_payoffs(6, 5) == (0.0, 0.0)
    assert round_payoffs(9, 9) == (0.0, 0.0)


def test_v1_concede_meets_fair_split_in_the_last_round():
    trace = play_one(
        get_game("negotiation"),
        [get_strategy("negotiation", "Concede"), get_strategy("negotiation", "FairSplit")],
        0,
    )
    assert [r.payoffs for r in trace.rounds] == [(0, 0), (0, 0), (0, 0), (5, 5)]
    assert [r.info["breakdown"] for r in trace.rounds] == [True, True, True, False]


def test_v2_feasibility_is_elementwise():
    pool = (2, 1, 3)
    assert fits((1, 0, 3), (1, 1, 0), pool)
    assert not fits((2, 0, 0), (1, 0, 0), pool)  # books over by one
    assert not fits((0, 1, 0), (0, 1, 0), pool)
    assert worth((1, 0, 3), (5, 2, 1)) == 8


def test_v2_episode_pays_by_private_values():
    game = get_game("multi_issue")
    state = game.new_episode(5)
    pool, values = state.deal.pool, state.deal.values
    fair = tuple(p // 2 for p in pool)
    result = state.apply({0: fair, 1: fair})
    assert result.payoffs == (worth(fair, values[0]), worth(fair, values[1]))
    greedy = state.apply({0: pool, 1: (1, 0, 0)})
    assert greedy.payoffs == (0.0, 0.0) and greedy.info["breakdown"]


def test_v2_values_sum_to_ten_and_pools_in_range():
    game = get_game("multi_issue")
    for seed in range(50):
        deal = game.new_episode(seed).deal
        assert all(1 <= p <= 4 for p in deal.pool)
        assert all(sum(v) == 10 and min(v) >= 0 for v in deal.values)


def test_v2_concede_gives_up_one_unit_a_round():
    game = get_game("multi_issue")
    strategy = get_strategy("multi_issue", "ConcedeNeg")
    state = game.new_episode(2)
    totals = []
    while state.to_act():
        demand = strategy.act([state.observe(0)])[0].action
        totals.append(sum(demand))
        state.apply({0: demand, 1: (0, 0, 0)})
    assert all(b == max(a - 1, 0) for a, b in zip(totals, totals[1:], strict=False))
