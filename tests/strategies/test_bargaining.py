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
    # round 3 of 10 is the seller's 2nd of its 5 turns (rounds 1, 3, 5, 7, 9):
    # 150 + (100 − 150)·1/4 = 137.50
    counter = choose(
        "Linear",
        view(listing=False, round=3, my_offers=(150.0,), their_offers=(70.0,), their_standing=70.0),
    )
    assert [c.render() for c in counter.calls] == [
        "respond_to_offer(response=False)",
        "make_offer(price=137.5)",
        "wait_for_response()",
    ]
    assert counter.thought == (
        "The buyer's offer of $70.00 is less than I would accept now, so I reject it and counter "
        "at $137.50 in round 3 of 10; I concede the same amount every round."
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


TIME_DEPENDENT = ("Boulware", "Linear", "Conceder")


@pytest.mark.parametrize("max_rounds", [10, 9, 6, 3])
@pytest.mark.parametrize("role", ["seller", "buyer"])
@pytest.mark.parametrize("name", TIME_DEPENDENT)
def test_a_time_dependent_bargainer_reaches_its_reservation_value_on_its_own_last_turn(
    name, role, max_rounds
):
    first = 1 if role == "seller" else 2
    rounds = list(range(first, max_rounds + 1, 2))  # its own turns: the parties alternate
    strategy = get_strategy("bargaining", name)
    targets = [
        strategy.target(view(role, 100.0, round=r, max_rounds=max_rounds, listing=False))
        for r in rounds
    ]
    start = 150.0 if role == "seller" else 50.0  # the anchors: max(1.5·100, 150), min(50, 60)
    if len(rounds) > 1:
        assert targets[0] == pytest.approx(start)
    assert targets[-1] == pytest.approx(100.0)  # its deadline is its own last turn
    assert all(abs(b - 100) < abs(a - 100) for a, b in zip(targets, targets[1:], strict=False))


def test_a_boulware_seller_no_longer_stops_short_of_its_reservation_value():
    # before: round 9 of 10 counted both parties' turns, (8/9)^5 = 55.5% of the way
    last = get_strategy("bargaining", "Boulware").target(view(round=9, listing=False))
    assert last == pytest.approx(100.0)


@pytest.mark.parametrize("role", ["seller", "buyer"])
def test_tit_for_tat_offers_its_reservation_value_on_its_own_last_turn(role):
    last_round = 9 if role == "seller" else 10
    turn = choose(
        "TitForTatConcession",
        view(
            role,
            100.0,
            round=last_round,
            listing=False,
            my_offers=(150.0, 145.0) if role == "seller" else (50.0, 55.0),
            their_offers=(60.0, 61.0) if role == "seller" else (140.0, 139.0),
            their_standing=61.0 if role == "seller" else 139.0,
        ),
    )
    assert turn.calls[1].render() == "make_offer(price=100.0)"
    assert "this is my last turn, so I offer my reservation value" in turn.thought


def play_pairing(seller: str, buyer: str, gft: int = 12, ngft: int = 8) -> list[dict]:
    """The final round's facts of ``seller`` against ``buyer`` on a tournament's scenarios."""
    from stratagem.play import EpisodeSpec, play

    game = get_game("bargaining")
    agents = (get_strategy("bargaining", seller), get_strategy("bargaining", buyer))
    scenarios = game.tournament_scenarios(gft, ngft, seed=7)
    specs = [EpisodeSpec(str(k), 7000 + k, agents, scenario=s) for k, s in enumerate(scenarios)]
    return [{**t.scenario, **t.rounds[-1].info} for t in play(game, specs)]


CONCEDING = (*TIME_DEPENDENT, "TitForTatConcession")


@pytest.mark.parametrize("seller", CONCEDING)
@pytest.mark.parametrize("buyer", CONCEDING)
def test_rule_based_pairings_deal_inside_the_zopa_and_walk_away_without_one(seller, buyer):
    infos = play_pairing(seller, buyer)
    assert {i["regime"] for i in infos} == {"GFT", "NGFT"}
    for info in infos:
        if info["regime"] == "GFT":  # a deal, inside the ZOPA
            assert info["deal"], (info["seller_value"], info["buyer_value"], info["offers"])
            assert info["seller_value"] <= info["price"] <= info["buyer_value"]
        else:  # no deal: both walk away rather than lose
            assert not info["deal"]


@pytest.mark.parametrize("other", [*CONCEDING, "ZeroIntelligence", "ReservationPrice"])
def test_the_responder_and_zero_intelligence_never_deal_beyond_their_value(other):
    for name in ("ReservationPrice", "ZeroIntelligence"):
        for seller, buyer in ((name, other), (other, name)):
            for info in play_pairing(seller, buyer):
                if info["deal"]:
                    assert info["regime"] == "GFT", (seller, buyer, info["offers"])
                    assert info["seller_value"] <= info["price"] <= info["buyer_value"]


def test_the_responder_closes_deals_when_the_other_side_offers_enough():
    # a buyer that answers a conceding seller deals in every GFT scenario (the seller's offers
    # reach its own value, inside the buyer's, before the end); as a seller it lists once and
    # then depends on the buyer's offers, which may come too late
    infos = play_pairing("Conceder", "ReservationPrice")
    assert all(i["deal"] for i in infos if i["regime"] == "GFT")
    assert not any(i["deal"] for i in infos if i["regime"] == "NGFT")


def test_the_reservation_price_responder_lists_at_its_value_and_compares_before_it_answers():
    listing = choose("ReservationPrice", view("seller", 100.0))
    assert listing.calls[0].render() == "make_offer(price=100.0)"
    assert listing.thought == "I list the item at my reservation value of $100.00."
    v = dict(round=2, listing=False, their_offers=(120.0,), my_standing=None)
    take = choose("ReservationPrice", view("buyer", 194.02, their_standing=181.72, **v))
    assert [c.render() for c in take.calls] == ["respond_to_offer(response=True)"]
    assert take.thought == (
        "The seller offers $181.72; my reservation value is $194.02, so the offer is lower. As "
        "the buyer I accept a price that is lower or the same: I accept."
    )
    refuse = choose("ReservationPrice", view("seller", 194.02, their_standing=181.72, **v))
    assert [c.render() for c in refuse.calls] == [
        "respond_to_offer(response=False)",
        "wait_for_response()",
    ]  # it never counters
    assert refuse.thought == (
        "The buyer offers $181.72; my reservation value is $194.02, so the offer is lower. As "
        "the seller I accept a price that is higher or the same, so I reject it."
    )
    same = choose("ReservationPrice", view("seller", 194.02, their_standing=194.02, **v))
    assert "so the offer is the same" in same.thought
    assert [c.render() for c in same.calls] == ["respond_to_offer(response=True)"]
    idle = choose("ReservationPrice", view("buyer", 50.0, round=4, listing=False))
    assert [c.render() for c in idle.calls] == ["wait_for_response()"]


def test_zero_intelligence_draws_within_its_budget_and_takes_what_beats_its_draw():
    seller, buyer = view("seller", 100.0), view("buyer", 100.0, round=2, listing=False)
    zi = get_strategy("bargaining", "ZeroIntelligence")
    asks = [zi.choose(seller, random.Random(i)).calls[0].arg("price") for i in range(300)]
    bids = [zi.choose(buyer, random.Random(i)).calls[0].arg("price") for i in range(300)]
    assert 100.0 <= min(asks) and max(asks) <= 150.0 and max(asks) - min(asks) > 40
    assert 60.0 <= min(bids) and max(bids) <= 100.0 and max(bids) - min(bids) > 30
    # an open offer at the far end of its range beats every draw; one beyond its value, none
    at_value = view("buyer", 100.0, round=2, listing=False, their_standing=60.0)
    beyond = view("buyer", 100.0, round=2, listing=False, their_standing=100.01)
    assert all(zi.choose(at_value, random.Random(i)).calls[0].arg("response") for i in range(50))
    assert not any(
        zi.choose(beyond, random.Random(i))
        .calls[0]
        .render()
        .startswith("respond_to_offer(response=True")
        for i in range(50)
    )
