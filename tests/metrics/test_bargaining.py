"""Every bargaining metric on hand-made traces (SPEC §8; seed 004 §3.3.3, Tables 7-8)."""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.errors import ConfigError
from stratagem.games.bargaining import Bargaining, Call, Invalid, Turn
from stratagem.games.bargaining.catalog import Item, Scenario
from stratagem.metrics import bargaining as bm
from stratagem.trace import Trace

ITEM = Item("Test lamp", "home", "A lamp.", 50.0, 150.0)
WAIT = Call("wait_for_response")


def make(p):
    return Call("make_offer", (("price", p),))


def offer(p):
    return Turn((make(p), WAIT))


def counter(p):
    """Reject the open offer and counter at ``p`` (one turn)."""
    return Turn((Call("respond_to_offer", (("response", False),)), make(p)))


ACCEPT = Turn((Call("respond_to_offer", (("response", True),)),))
TALK = Turn((Call("send_message", (("content", "hm"),)),))
QUIT = Turn((Call("quit_negotiation"),))


def trace(
    turns, v_s=80.0, v_b=120.0, agents=("S", "B"), index=0, item=ITEM, episode_id=None, **params
):
    """Plays ``turns`` (seller first) on one scenario and returns the trace of the episode."""
    game = Bargaining([item], **params)
    regime = "GFT" if v_b > v_s else "NGFT"
    state = game.from_scenario(Scenario(index, item, v_s, v_b, regime), 0)
    result = None
    for turn in turns:
        result = state.apply({state.to_act()[0]: turn})
    assert result is not None, "the turns must end the negotiation"
    return Trace(
        episode_id=episode_id or f"{agents[0]}|{agents[1]}|{index:05d}",
        game="bargaining",
        version=Bargaining.version,
        seed=0,
        agents=agents,
        rounds=(result,),
        decisions=(),
        scenario=state.scenario(),
        meta={},
    )


def rows_of(*traces) -> pd.DataFrame:
    return pd.DataFrame(bm.negotiation_rows(traces))


def role(rows, name):
    return rows[rows.role == name].iloc[0]


# ---- violations (self, induced, combined) ----


def test_an_over_reservation_offer_that_is_accepted_is_the_offerers_violation():
    # the seller lists below its cost and the buyer presses accept: the seller violates
    rows = rows_of(trace([offer(70.0), ACCEPT]))
    seller, buyer = role(rows, "seller"), role(rows, "buyer")
    assert (seller.violation, seller.induced_violation, seller.violation_any) == (1.0, 0.0, 1.0)
    assert (buyer.violation, buyer.induced_violation, buyer.violation_any) == (0.0, 1.0, 1.0)
    # the buyer bids above its value and the seller accepts: the buyer violates
    rows = rows_of(trace([offer(200.0), counter(130.0), ACCEPT]))
    assert role(rows, "buyer").violation == 1.0 and role(rows, "seller").violation == 0.0
    assert role(rows, "seller").induced_violation == 1.0


def test_no_deal_is_never_a_violation():
    rows = rows_of(trace([offer(70.0), QUIT]))
    assert rows[["violation", "induced_violation", "violation_any", "deal"]].sum().sum() == 0
    assert (rows.utility == 0).all() and rows.deal_utility.isna().all()


turn_choices = st.one_of(
    st.builds(offer, st.floats(1, 400).map(lambda x: round(x, 2))),
    st.builds(counter, st.floats(1, 400).map(lambda x: round(x, 2))),
    st.just(ACCEPT),
    st.just(TALK),
    st.just(QUIT),
)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(10, 300).map(lambda x: round(x, 2)),
    st.floats(0.01, 100).map(lambda x: round(x, 2)),
    st.lists(turn_choices, min_size=12, max_size=12),
)
def test_ngft_violation_rate_equals_ngft_deal_rate_for_any_agents(v_b, gap, turns):
    game = Bargaining([ITEM], max_corrections=0)
    state = game.from_scenario(Scenario(0, ITEM, round(v_b + gap, 2), v_b, "NGFT"), 0)
    result = None
    for turn in turns:
        if not state.to_act():
            break
        result = state.apply({state.to_act()[0]: turn})
    assert result is not None
    t = Trace(
        "a|b|0",
        "bargaining",
        Bargaining.version,
        0,
        ("a", "b"),
        (result,),
        (),
        state.scenario(),
        {},
    )
    rows = rows_of(t)
    assert (rows.violation_any == rows.deal).all()
    assert (rows.violation + rows.induced_violation >= rows.deal).all()


def test_ngft_violation_rate_equals_deal_rate_over_a_rule_based_round_robin():
    from stratagem.play import EpisodeSpec, play
    from stratagem.strategies import get_strategy

    game = Bargaining(split="test")
    names = ["Boulware", "Linear", "Conceder", "TitForTatConcession", "NaiveAccepter"]
    scenes = game.tournament_scenarios(0, 8, seed=3)
    specs = [
        EpisodeSpec(
            f"{a}|{b}|{i:05d}",
            i,
            (get_strategy("bargaining", a), get_strategy("bargaining", b)),
            scenario=sc,
        )
        for a in names
        for b in names
        for i, sc in enumerate(scenes)
    ]
    rows = pd.DataFrame(bm.negotiation_rows(play(game, specs)))
    rates = rows.groupby(["agent", "role"])[["violation_any", "deal"]].mean()
    assert np.allclose(rates.violation_any, rates.deal)
    assert rates.deal.max() == 1.0  # NaiveAccepter makes deals, so the check is not vacuous


# ---- surplus, utility, deal ----


def test_surplus_shares_on_a_valid_gft_deal():
    rows = rows_of(trace([offer(140.0), counter(100.0), counter(110.0), ACCEPT]))
    seller, buyer = role(rows, "seller"), role(rows, "buyer")
    assert math.isclose(seller.surplus_share, 0.75) and math.isclose(buyer.surplus_share, 0.25)
    assert (seller.utility, buyer.utility) == (30.0, 10.0)
    assert (seller.deal_utility, buyer.deal_utility) == (30.0, 10.0)
    assert seller.deal == buyer.deal == 1.0


def test_surplus_share_is_undefined_outside_valid_gft_deals():
    out_of_zopa = rows_of(trace([offer(130.0), ACCEPT]))  # above v_b = 120
    ngft = rows_of(trace([offer(130.0), ACCEPT], v_s=125.0, v_b=120.0))
    no_deal = rows_of(trace([offer(130.0), QUIT]))
    for rows in (out_of_zopa, ngft, no_deal):
        assert rows.surplus_share.isna().all()


# ---- behavioural drivers ----


def test_seller_initial_aggressiveness_is_the_raw_listing_ratio():
    rows = rows_of(trace([offer(240.0), QUIT]))
    assert role(rows, "seller").aggressiveness == 3.0  # not clipped at any ceiling
    assert math.isnan(role(rows, "buyer").aggressiveness)


def test_a_fallback_listing_is_not_an_anchor():
    rows = rows_of(trace([Invalid("no code block"), QUIT], max_corrections=0))
    assert role(rows, "seller").fallbacks == 1.0
    assert math.isnan(role(rows, "seller").aggressiveness)


def test_gap_closure_is_measured_against_the_current_ask():
    # listing 160; the buyer only talks; the seller lowers to 140; the buyer's first bid is 105
    t = trace([offer(160.0), TALK, offer(140.0), counter(105.0), QUIT])
    buyer = role(rows_of(t), "buyer")
    assert math.isclose(buyer.gap_closure, (140.0 - 105.0) / 140.0)  # not (160 − 105) / 160
    assert math.isclose(buyer.reservation_ratio, (120.0 - 105.0) / 120.0)
    assert math.isnan(role(rows_of(t), "seller").gap_closure)


def test_buyer_drivers_are_undefined_without_a_bid():
    buyer = role(rows_of(trace([offer(160.0), ACCEPT])), "buyer")
    assert math.isnan(buyer.gap_closure) and math.isnan(buyer.reservation_ratio)


def test_concession_rate_on_valid_deals():
    # seller 160 → 140 → 120 (v_s = 80); buyer 60 → 90 (v_b = 120); the seller accepts 90
    bids = [offer(160.0), counter(60.0), counter(140.0), counter(90.0), counter(120.0)]
    assert rows_of(trace([*bids, QUIT])).concession.isna().all()  # valid deals only
    t = trace([*bids, counter(100.0), ACCEPT])
    rows = rows_of(t)
    expected_seller = np.mean([(160 - 140) / (160 - 80), (140 - 120) / (140 - 80)])
    expected_buyer = np.mean([(90 - 60) / (120 - 60), (100 - 90) / (120 - 90)])
    assert math.isclose(role(rows, "seller").concession, expected_seller)
    assert math.isclose(role(rows, "buyer").concession, expected_buyer)


def test_temporal_patience_counts_rounds_as_turns():
    assert role(rows_of(trace([offer(110.0), ACCEPT])), "seller").rounds == 2.0
    five = trace([offer(140.0), counter(100.0), counter(120.0), counter(105.0), ACCEPT])
    assert role(rows_of(five), "buyer").rounds == 5.0
    limit = trace([offer(140.0)] + [TALK] * 9)
    assert rows_of(limit).rounds.tolist() == [10.0, 10.0]


# ---- behavioural consistency: both checks can fail ----


def test_accepting_worse_than_a_refused_offer_fails_the_accept_check():
    # the buyer refuses 100 (counters 90), then accepts 110: worse than what it refused; the
    # seller's rise from 100 to 110 is worse for the buyer than terms the buyer refused
    t = trace([offer(100.0), counter(90.0), counter(110.0), ACCEPT])
    rows = rows_of(t)
    buyer, seller = role(rows, "buyer"), role(rows, "seller")
    assert (buyer.consistent_accept, buyer.consistent_offers, buyer.consistent) == (0.0, 1.0, 0.5)
    assert (seller.consistent_accept, seller.consistent_offers, seller.consistent) == (
        1.0,
        0.0,
        0.5,
    )


def test_non_monotonic_offers_fail_the_offers_check_and_both_checks_can_fail_together():
    turns = [
        offer(150.0),  # S lists
        counter(100.0),  # B bids 100
        counter(140.0),  # S refuses 100
        counter(95.0),  # B bids below its own refused 100: non-monotonic
        counter(145.0),  # S asks above its own refused 140: non-monotonic
        counter(90.0),  # B again lower
        ACCEPT,  # S accepts 90 < the 100 it refused
    ]
    rows = rows_of(trace(turns, v_s=60.0))
    seller, buyer = role(rows, "seller"), role(rows, "buyer")
    assert (seller.consistent_accept, seller.consistent_offers, seller.consistent) == (0, 0, 0)
    assert (buyer.consistent_accept, buyer.consistent_offers) == (1.0, 0.0)


def test_monotonic_play_is_consistent():
    rows = rows_of(trace([offer(140.0), counter(100.0), counter(120.0), counter(105.0), ACCEPT]))
    assert (rows.consistent == 1.0).all()


def test_an_explicit_rejection_counts_as_refusing():
    t = trace(
        [
            offer(100.0),
            Turn((Call("respond_to_offer", (("response", False),)),)),
            offer(105.0),
            ACCEPT,
        ]
    )
    rows = rows_of(t)
    assert role(rows, "buyer").consistent_accept == 0.0
    assert role(rows, "seller").consistent_offers == 0.0


# ---- aggregates: summary, ranking, tiers, profiles, heatmap tables ----


def _pool():
    """Hand-made traces: seller A vs buyer B and seller B vs buyer A on two GFT scenarios and
    one NGFT scenario."""
    out = []
    # A sells to B: a deal at 110 (A's share 0.75), a no-deal, an NGFT violation by B
    out.append(
        trace([offer(140.0), counter(100.0), counter(110.0), ACCEPT], agents=("A", "B"), index=0)
    )
    out.append(trace([offer(240.0), QUIT], agents=("A", "B"), index=1, v_s=90.0, v_b=130.0))
    out.append(trace([offer(130.0), ACCEPT], agents=("A", "B"), index=2, v_s=125.0, v_b=120.0))
    # B sells to A: a deal at 90 (B's share 0.25) and a deal at 100 on scenario 1, no deal
    out.append(trace([offer(120.0), counter(90.0), ACCEPT], agents=("B", "A"), index=0))
    out.append(trace([offer(100.0), ACCEPT], agents=("B", "A"), index=1, v_s=90.0, v_b=130.0))
    out.append(trace([offer(130.0), QUIT], agents=("B", "A"), index=2, v_s=125.0, v_b=120.0))
    return out


def test_ranking_score_is_surplus_share_times_deal_rate():
    rows = rows_of(*_pool())
    rank = bm.ranking(rows).set_index(["role", "agent"])
    a_seller = rank.loc[("seller", "A")]
    assert math.isclose(a_seller.surplus_share, 0.75) and a_seller.deal_rate == 0.5
    assert math.isclose(a_seller.score, 0.375)
    b_seller = rank.loc[("seller", "B")]  # shares 0.25 and 0.25 (100 on 90..130), two deals
    assert math.isclose(b_seller.surplus_share, 0.25) and b_seller.deal_rate == 1.0
    assert rank.loc[("seller", "A"), "rank"] == 1 and rank.loc[("seller", "B"), "rank"] == 2
    assert list(bm.ranking(rows).role) == ["seller", "seller", "buyer", "buyer"]


def test_summary_has_mean_stderr_and_count_per_agent_role_regime():
    summary = bm.summarise(rows_of(*_pool()))
    cell = summary[
        (summary.agent == "A")
        & (summary.role == "seller")
        & (summary.regime == "GFT")
        & (summary.metric == "deal")
    ].iloc[0]
    assert (cell.value, cell.n) == (0.5, 2) and math.isclose(cell.stderr, 0.5)
    empty = summary[(summary.regime == "NGFT") & (summary.metric == "surplus_share")]
    assert (empty.n == 0).all() and empty.value.isna().all()


def _scenario_rows(values, regime="GFT"):
    """Rows for one agent per scenario with the given (reference, v_s, v_b)."""
    rows = []
    for i, (ref, v_s, v_b) in enumerate(values):
        for r in ("seller", "buyer"):
            rows.append(
                {
                    "episode_id": f"x|y|{i:05d}",
                    "scenario": i,
                    "agent": "x",
                    "opponent": "y",
                    "role": r,
                    "regime": regime,
                    "reference": ref,
                    "seller_value": v_s,
                    "buyer_value": v_b,
                    **{m: float(i) for m in bm.METRICS},
                }
            )
    return pd.DataFrame(rows)


def test_quintile_edges_are_stable_order_independent_and_keep_ties_together():
    rng = random.Random(0)
    values = [
        (float(rng.choice([10, 20, 20, 20, 30, 40, 55, 70, 90])), 1.0 + i, 200.0 - i)
        for i in range(100)
    ]
    rows = _scenario_rows(values)
    tiered = bm.with_tiers(rows)
    shuffled = bm.with_tiers(rows.sample(frac=1.0, random_state=1))
    assert (
        tiered.set_index(["scenario", "role"])
        .tier.sort_index()
        .equals(shuffled.set_index(["scenario", "role"]).tier.sort_index())
    )
    # ties share a tier
    assert tiered.groupby("reference").tier.nunique().max() == 1
    # distinct values fall 20 to a quintile
    distinct = bm.with_tiers(_scenario_rows([(float(i), float(i), float(i)) for i in range(100)]))
    counts = distinct[distinct.role == "seller"].tier.value_counts().sort_index()
    assert counts.to_dict() == {f"Q{i}": 20 for i in range(1, 6)}


def test_own_value_tiers_use_each_roles_own_reservation_value():
    # v_s rises with the index, v_b falls: a row's own tier follows its own value
    rows = _scenario_rows([(100.0, float(i), float(100 - i)) for i in range(50)])
    tiered = bm.with_tiers(rows, "own")
    low_index = tiered[tiered.scenario == 0].set_index("role").tier
    assert (low_index["seller"], low_index["buyer"]) == ("Q1", "Q5")
    with pytest.raises(ConfigError):
        bm.with_tiers(rows, "median")


def test_price_tiers_per_regime_and_spreads():
    gft = _scenario_rows([(float(i), float(i), float(i + 1)) for i in range(50)])
    ngft = _scenario_rows([(float(i), float(i + 1), float(i)) for i in range(50)], "NGFT")
    ngft["scenario"] += 100
    means, spreads = bm.price_tiers(pd.concat([gft, ngft]), "reference")
    assert set(means.regime) == {"GFT", "NGFT"} and set(means.tier) == {
        f"Q{i}" for i in range(1, 6)
    }
    assert means[means.regime == "NGFT"].surplus_share.isna().all()  # GFT only
    assert means[means.regime == "NGFT"].deal.isna().all()
    assert means[means.regime == "NGFT"].violation_any.notna().all()  # violations in both
    gft_seller = spreads[(spreads.regime == "GFT") & (spreads.role == "seller")].iloc[0]
    assert gft_seller.surplus_share == 44.5 - 4.5  # metric = index: Q5 mean 44.5, Q1 mean 4.5


def test_profiles_are_per_role_with_the_raw_anchoring_ratio():
    traces = _pool()
    # make A a 3× anchoring seller on one more GFT scenario
    traces.append(
        trace([offer(240.0), counter(100.0), counter(110.0), ACCEPT], agents=("A", "B"), index=3)
    )
    prof = bm.profiles(rows_of(*traces)).set_index(["agent", "role"])
    assert list(prof.columns) == list(bm.PROFILE_AXES)
    assert list(prof.index.get_level_values("role")) == ["seller", "seller", "buyer", "buyer"]
    a_seller = prof.loc[("A", "seller")]
    # GFT listings only, as the other GFT axes (the NGFT listing 130 / 125 is left out)
    assert math.isclose(a_seller["anchoring"], np.mean([140 / 80, 240 / 90, 240 / 80]))
    assert a_seller["anchoring"] > 2  # raw, never clipped to 100
    assert math.isclose(prof.loc[("A", "buyer"), "anchoring"], (120 - 90) / 120)  # gap closure
    assert prof.loc[("A", "seller"), "IR compliance"] == 100.0
    assert prof.loc[("B", "buyer"), "pressure resistance"] == 0.0  # B bought above v_b in NGFT
    assert prof.loc[("A", "buyer"), "pressure resistance"] == 100.0
    assert prof.loc[("B", "seller"), "deal rate %"] == 100.0


def test_profile_consistency_is_100_minus_the_own_value_surplus_spread():
    rows = _scenario_rows([(100.0, float(i), float(i + 50)) for i in range(50)])
    rows["surplus_share"] = np.where(rows.role == "seller", rows.seller_value / 100, 0.5)
    prof = bm.profiles(rows).set_index("role")
    means = bm.with_tiers(rows, "own")
    seller_means = means[means.role == "seller"].groupby("tier").surplus_share.mean()
    spread = seller_means.max() - seller_means.min()
    assert math.isclose(prof.loc["seller", "consistency"], 100 - 100 * spread)
    assert prof.loc["buyer", "consistency"] == 100.0  # a flat share: no spread


def test_pairwise_tables_put_buyers_in_rows_and_sellers_in_columns():
    rows = rows_of(*_pool())
    table = bm.pairwise(rows, "deal", "buyer", "GFT")
    assert table.index.name == "buyer" and table.columns.name == "seller"
    assert table.loc["B", "A"] == 0.5 and table.loc["A", "B"] == 1.0
    assert math.isnan(table.loc["A", "A"])  # no self-play here: the cell stays, empty


def test_traces_of_the_old_rules_are_refused():
    old = dataclasses.replace(trace([offer(110.0), ACCEPT]), version=1)
    with pytest.raises(ConfigError, match="version 1"):
        bm.negotiation_rows([old])


def test_rows_per_trace_and_seat_bookkeeping():
    rows = rows_of(trace([Invalid("bad"), offer(110.0), ACCEPT]))
    assert list(rows.role) == ["seller", "buyer"]
    assert role(rows, "seller").parse_failures == 1.0 and role(rows, "seller").fallbacks == 0.0
    assert (role(rows, "seller").own_value, role(rows, "buyer").own_value) == (80.0, 120.0)
    assert set(bm.METRICS) <= set(rows.columns)
