"""The rule-based Deal or No Deal negotiators act on λ and on the turn cap, and vary their words."""

from __future__ import annotations

import random
import re
from collections import defaultdict

import pytest

from stratagem.games import get_game
from stratagem.games.dond import (
    Context,
    DondState,
    Say,
    Settings,
    complement,
    divisions,
    render_share,
    score,
)
from stratagem.play import play
from stratagem.strategies import get_strategy
from stratagem.strategies.dond import (
    Cooperative,
    FairSplit,
    ValueGreedy,
    best_for_me,
    budget,
    claim_in,
    progress,
)
from stratagem.strategies.dond.talk import (
    CLAIMS,
    DEALS,
    VALUES,
    claim_text,
    deal_in,
    deal_text,
    values_in,
    values_text,
)
from stratagem.tournament.run import round_robin_specs

SHARE_TEXT = re.compile(r"\(\d+ books, \d+ hats, \d+ balls\)")
NEGOTIATORS = ("ValueGreedy", "FairSplit", "Cooperative", "Stubborn")
# counts 2 books, 2 hats, 1 ball; seat 0 values (1, 2, 4), seat 1 values (3, 2, 0)
CTX = Context((2, 2, 1), ((1, 2, 4), (3, 2, 0)))


def tournament(count: int = 12, **params):
    """The round robin of the four negotiators (itself included), as ``stratagem tournament``."""
    game = get_game("dond", **params)
    agents = {n: get_strategy("dond", n) for n in NEGOTIATORS}
    traces = play(game, round_robin_specs(agents, count=count, seed=42))
    return sorted(traces, key=lambda t: t.episode_id)


def dialogue(trace) -> list[str]:
    return [d["text"] for d in trace.rounds[0].info["dialogue"]]


def view_of(turns=(), seat=0, **settings):
    s = DondState(
        CTX, next(x for x in range(99) if DondState(CTX, x).first == 0), Settings(**settings)
    )
    for t in turns:
        s.apply({s.turn_seat: t})
    return s.view(seat)


def test_every_wording_is_read_back():
    share, rest, values = (1, 0, 2), (3, 2, 0), (2, 1, 3)
    for i in range(len(CLAIMS)):
        assert claim_in(claim_text(share, rest, i)) == share, CLAIMS[i]
        assert deal_in(claim_text(share, rest, i)) is None
    for i in range(len(DEALS)):
        assert deal_in(deal_text(share, rest, i)) == share, DEALS[i]
        assert claim_in(deal_text(share, rest, i)) is None
    for i in range(len(VALUES)):
        assert values_in(values_text(values, i)) == values, VALUES[i]


def test_a_claim_after_any_objective_line_stays_a_claim():
    """ "We both gain from a good deal. You get …" claims; it does not accept (a deal)."""
    from types import SimpleNamespace

    from stratagem.strategies.dond import _lam_lines
    from stratagem.strategies.dond.talk import compose

    share, rest = (1, 0, 2), (3, 2, 0)
    bodies = [claim_text(share, rest, i) for i in range(len(CLAIMS))]
    for lam in (-1.0, 0.0, 1.0):
        for text in compose(_lam_lines(SimpleNamespace(lam=lam)), bodies):
            assert claim_in(text) == share and deal_in(text) is None, text


def test_claims_and_deals_spell_out_both_shares():
    """The proposal that closes a deal is written in the dialogue: a learner copies it."""
    for lam in (1.0, 0.0):
        for trace in tournament(lam=lam):
            info = trace.rounds[-1].info
            messages = [d["text"] for d in info["dialogue"] if d["kind"] == "message"]
            for text in messages:
                share = claim_in(text) or deal_in(text)
                if share is None:
                    continue  # a values statement
                rest = complement(tuple(info["counts"]), share)
                assert render_share(share) in text and render_share(rest) in text, text
            if info["agreement"]:
                written = " ".join(messages)
                assert all(render_share(tuple(p)) in written for p in info["proposals"])


def test_each_seat_proposes_the_first_share_of_the_message_it_has_just_read():
    """The reader's share comes first in every claim and deal, so each seat's closing proposal is
    the first share of the other seat's last message (one copy rule for both seats)."""
    agreed = 0
    for lam in (1.0, 0.0):
        for trace in tournament(lam=lam):
            info = trace.rounds[-1].info
            if not info["agreement"]:
                continue
            agreed += 1
            for seat, proposal in enumerate(info["proposals"]):
                read = [
                    d["text"]
                    for d in info["dialogue"]
                    if d["seat"] != seat and d["kind"] == "message" and SHARE_TEXT.search(d["text"])
                ]
                heard = read[-1]
                first = SHARE_TEXT.search(heard)
                assert first and first.group(0) == render_share(tuple(proposal)), heard
    assert agreed >= 250  # measured: 315 of 384


def test_a_tournament_under_lam_1_and_lam_minus_1_gives_different_dialogues():
    coop, comp = tournament(lam=1.0), tournament(lam=-1.0)
    assert [t.episode_id for t in coop] == [t.episode_id for t in comp]
    differ = sum(dialogue(a) != dialogue(b) for a, b in zip(coop, comp, strict=True))
    assert differ >= 0.9 * len(coop)  # measured: 192 of 192
    agreed = [sum(t.rounds[0].info["agreement"] for t in ts) / len(ts) for ts in (coop, comp)]
    assert agreed[0] > agreed[1] + 0.5  # measured: 1.00 under λ = 1, 0.16 under λ = −1


def test_lam_sets_what_a_negotiator_aims_at_and_accepts():
    coop, comp = view_of(lam=1.0), view_of(lam=-1.0)
    stated = view_of([Say("My values: a book is worth 3, a hat 2, a ball 0.")], lam=1.0)
    # λ = 1 with the other's values stated: the joint-best division (ball to seat 0, books to 1)
    joint = max(
        divisions(CTX.counts),
        key=lambda s: score(CTX.values[0], s) + score(CTX.values[1], complement(CTX.counts, s)),
    )
    assert score(CTX.values[0], best_for_me(stated)) + score(
        CTX.values[1], complement(CTX.counts, best_for_me(stated))
    ) == score(CTX.values[0], joint) + score(CTX.values[1], complement(CTX.counts, joint))
    assert best_for_me(comp) == (2, 2, 1)  # λ = −1: everything
    # λ = −1: half its value is not enough when the other (flat prior) keeps more of the pool
    assert FairSplit().accepts(view_of(lam=0.0), (1, 0, 1))
    assert not FairSplit().accepts(comp, (0, 2, 0)) and FairSplit().accepts(coop, (0, 2, 0))
    assert Cooperative().demand(comp) == (2, 2, 1)


def test_concession_schedules_fit_the_turn_cap():
    # a 6-turn cap leaves the first speaker 3 messages: ValueGreedy concedes on its last one
    greedy = ValueGreedy()
    first = view_of(max_turns=6)
    assert budget(first) == 3 and progress(first) == 0
    opening = greedy.demand(first)
    late = view_of([Say("a"), Say("b"), Say("c"), Say("d")], max_turns=6)
    assert progress(late) == 1 and greedy.demand(late) != opening
    assert greedy.demand(view_of([Say("a"), Say("b"), Say("c"), Say("d")])) == opening  # cap 20


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_negotiators_reach_agreement_under_a_six_turn_cap(lam):
    traces = tournament(count=40, lam=lam, max_turns=6)
    rates: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for t in traces:
        rates[tuple(t.agents)].append(t.rounds[0].info["agreement"])  # type: ignore[index]
    share = {pair: sum(v) / len(v) for pair, v in rates.items()}
    conceding = [p for p in share if "Stubborn" not in p]
    # measured per pairing of ValueGreedy, FairSplit and Cooperative: λ = 0: 0.57 to 1.00
    # (mean 0.86); λ = 1: 0.90 to 1.00 (before: ValueGreedy's pairings 0.00 to 0.50)
    assert min(share[p] for p in conceding) >= 0.45, share
    assert sum(share[p] for p in conceding) / len(conceding) >= 0.8, share
    assert share[("ValueGreedy", "ValueGreedy")] >= 0.45  # it concedes in time


def test_consecutive_own_messages_are_never_verbatim_repeats():
    pairs = repeats = 0
    for lam in (-1.0, 0.0, 1.0):
        for trace in tournament(count=8, lam=lam):
            info = trace.rounds[0].info
            for seat in (0, 1):
                messages = [
                    d["text"]
                    for d in info["dialogue"]
                    if d["seat"] == seat and d["kind"] == "message"
                ]
                pairs += max(len(messages) - 1, 0)
                repeats += sum(a == b for a, b in zip(messages, messages[1:], strict=False))
    assert pairs > 500 and repeats == 0  # measured: 0 of 3,493 (94% repeated before wording varied)


def test_wording_is_deterministic_per_seed_and_varies_across_seeds():
    view = view_of(lam=0.0)
    texts = {FairSplit().choose(view, random.Random(s)) for s in range(20)}
    assert len(texts) > 3
    assert FairSplit().choose(view, random.Random(5)) == FairSplit().choose(view, random.Random(5))
