from stratagem.games import get_game
from stratagem.games.ipd import PAYOFFS, Move
from stratagem.play import play_one
from stratagem.strategies import get_strategy

C, D = Move.COOPERATE, Move.DEFECT


def test_payoff_table():
    assert PAYOFFS[(C, C)] == (3, 3)
    assert PAYOFFS[(D, D)] == (1, 1)
    assert PAYOFFS[(D, C)] == (5, 0)
    assert PAYOFFS[(C, D)] == (0, 5)


def moves(a, b, seed=0):
    trace = play_one(get_game("ipd"), [get_strategy("ipd", a), get_strategy("ipd", b)], seed)
    return "".join(r.action(0)[0] for r in trace.rounds), "".join(
        r.action(1)[0] for r in trace.rounds
    )


def test_reactive_strategies():
    assert moves("TitForTat", "AlwaysDefect") == ("CDDDDDDD", "DDDDDDDD")
    assert moves("SuspiciousTFT", "AlwaysCooperate") == ("DCCCCCCC", "CCCCCCCC")
    assert moves("GrimTrigger", "AlternatingDefect") == ("CDDDDDDD", "DDCDCDCD")
    assert moves("TitForTwoTats", "AlwaysDefect") == ("CCDDDDDD", "DDDDDDDD")
    # win-stay lose-shift against a defector: C, then D (lost), then C (mutual D is a loss) ...
    assert moves("Pavlov", "AlwaysDefect") == ("CDCDCDCD", "DDDDDDDD")


def test_alternating_defect_alternates_against_retaliators_and_exploits_cooperators():
    assert moves("TitForTat", "AlternatingDefect") == ("CDDCDCDC", "DDCDCDCD")
    assert moves("AlwaysCooperate", "AlternatingDefect")[1] == "DDDDDDDD"


def test_externality_is_welfare_shortfall():
    game = get_game("ipd")
    trace = play_one(
        game, [get_strategy("ipd", "AlwaysDefect"), get_strategy("ipd", "AlwaysCooperate")], 0
    )
    assert game.externality(trace.rounds[0]) == 1 - 5 / 6
