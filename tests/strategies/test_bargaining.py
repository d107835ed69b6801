"""Rule-based bargainers write templated Thought/Code answers: exact wording per situation, and
every answer of every bargainer parses back to the turn it played with its thought."""

from __future__ import annotations

import random

import pytest

from stratagem.episode import Episode
from stratagem.games import get_game
from stratagem.games.bargaining import BargainingView
from stratagem.games.bargaining.tools import parse_turn
from stratagem.strategies import get_strategy
from stratagem.strategies.bargaining import STRATEGIES


def view(role="seller", reservation=100.0, **kw) -> BargainingView:
    fields = dict(
        role=role,
        reservation=reservation,
        low=60.0,
        high=150.0,
        round=1,
        max_rounds=10,
        listing=role == "seller",
        my_offers=(),
        their_offers=(),
        their_standing=None,
        my_standing=None,
        correction=None,
    )
    return BargainingView(**{**fields, **kw})


def choose(name, v):
    return get_strategy("bargaining", name).choose(v, random.Random(0))


def test_exact_thoughts_of_a_listing_a_counter_and_an_acceptance():
    listing = choose("Linear", view())
    assert listing.thought == (
        "I open at $150.00, well above my reservation value of $100.00, to leave room to concede."
    )
    # round 3 of 10: 150 + (100 − 150)·2/9 = 138.89
    counter = choose(
        "Linear",
        view(listing=False, round=3, my_offers=(150.0,), their_offers=(70.0,), their_standing=70.0),
    )
    assert [c.render() for c in counter.calls] == [
        "respond_to_offer(response=False)",
        "make_offer(price=138.89)",
        "wait_for_response()",
    ]
    assert counter.thought == (
        "The buyer's offer of $70.00 is less than I would accept now, so I reject it and counter "
        "at $138.89 in round 3 of 10; I concede the same amount every round."
    )
    # buyer, value 120, anchor min(60, 60) = 60; round 10: Boulware's target is its value
    accepted = choose(
        "Boulware",
        view(
            "buyer",
            120.0,
            round=10,
            my_offers=(60.0,),
            their_offers=(150.0, 110.0),
            their_standing=110.0,
        ),
    )
    assert accepted.calls[0].render() == "respond_to_offer(response=True)"
    assert accepted.thought == (
        "The seller's offer of $110.00 is at least as good as the $120.00 I would propose in "
        "round 10 of 10, and $10.00 below my reservation value of $120.00: I accept."
    )


def test_tit_for_tat_names_the_concession_it_mirrors_and_the_naive_accepter_its_loss():
    mirror = choose(
        "TitForTatConcession",
        view(
            listing=False,
            round=5,
            my_offers=(150.0, 145.0),
            their_offers=(60.0, 72.5),
            their_standing=72.5,
        ),
    )
    assert mirror.thought.endswith(
        "counter at $132.50 in round 5 of 10; I match the buyer's last concession of $12.50."
    )
    naive = choose(
        "NaiveAccepter", view("buyer", 90.0, round=2, their_offers=(150.0,), their_standing=150.0)
    )
    assert naive.thought == (
        "The seller offers $150.00. I accept any offer to close the deal, even though it costs "
        "me $60.00."
    )


@pytest.mark.parametrize("name", STRATEGIES.names())
def test_every_answer_parses_back_to_the_turn_played_and_its_thought(name):
    game = get_game("bargaining")
    seen = 0
    for i in range(6):  # in both seats, against a conceding opponent (deals happen)
        agents = (get_strategy("bargaining", name), get_strategy("bargaining", "Linear"))
        if i % 2:
            agents = agents[::-1]
        episode = Episode(game, str(i), 200 + i, (agents[0].name, agents[1].name))
        while not episode.done:
            for obs in episode.waiting():
                decision = agents[obs.seat].act([obs])[0]
                episode.submit(obs.seat, decision)
                if agents[obs.seat].name != name:
                    continue
                answer = episode.chat(obs.seat)[-1].content
                parsed = parse_turn(answer)
                assert parsed.calls == decision.action.calls
                assert parsed.thought == decision.action.thought != ""
                assert answer.startswith(f"Thought: {decision.action.thought}\nCode:\n```py\n")
                seen += 1
            episode.step()
    assert seen >= 6
