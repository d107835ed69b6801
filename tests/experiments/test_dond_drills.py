"""Perspective drills: four-turn Deal or No Deal games played by the engine, whose closing
proposals take each seat's own share of the deal — the reader's the deal's first share, the
writer's its second. `gen-sft --game dond --drills` is tested in test_drills.py."""

from __future__ import annotations

import re

import pytest

from experiments.drills import drills
from experiments.drills.dond.flaws import claim_flaw
from stratagem.errors import ConfigError
from stratagem.games.dond import complement, divisions, objective_text
from stratagem.strategies.dond.talk import CLAIMS, DEALS, claim_in, deal_in, values_in

SHARE = re.compile(r"\((\d+) books, (\d+) hats, (\d+) balls\)")
POOL = re.compile(r"items: (\d+) books?, (\d+) hats? and (\d+) balls?\.")


def shares(text: str) -> list[tuple[int, ...]]:
    return [tuple(map(int, m)) for m in SHARE.findall(text)]


def test_each_seat_proposes_its_own_share_of_the_deal():
    chats = list(drills("dond", 200, seed=7))
    assert len(chats) == 200
    firsts, lams = set(), set()
    for claimant, accepter in zip(chats[::2], chats[1::2], strict=True):
        counts = tuple(map(int, POOL.search(claimant.messages[0]["content"]).groups()))
        c = [m["content"] for m in claimant.messages[1:]]
        a = [m["content"] for m in accepter.messages[1:]]
        # the claimant: opens, claims, reads the deal, proposes the deal's first share
        assert c[0].startswith("The negotiation starts and you speak first.")
        claimed = claim_in(c[1])
        assert claimed is not None and claimed not in (counts, (0, 0, 0))
        granted = deal_in(c[2])
        assert granted == claimed == shares(c[2])[0]
        assert c[3] == f"[propose] ({granted[0]} books, {granted[1]} hats, {granted[2]} balls)"
        # the accepter: reads the claim, writes the deal, proposes the deal's second share
        assert a[0].startswith("The other player wrote:") and c[1][len("[message] ") :] in a[0]
        assert deal_in(a[1]) == claimed and shares(a[1])[1] == complement(counts, claimed)
        assert "The other player submitted its proposal" in a[2]
        assert shares(a[3]) == [complement(counts, claimed)]
        # an agreement: the two proposals add up to the pool, and both seats scored it
        assert claimant.agreement and accepter.agreement
        assert len(claimant.actions) == len(accepter.actions) == 2
        firsts.add(c[1].split("(")[0])
        lams.add(
            next(lam for lam in (0, 1) if objective_text(lam) in claimant.messages[0]["content"])
        )
    assert lams == {0, 1}
    assert len(firsts) >= 3  # the claim wordings vary


def wording_pattern(wording: str) -> re.Pattern[str]:
    text = re.escape(wording)
    for slot in ("{s}", "{rest}"):
        text = text.replace(re.escape(slot), r"\(\d+ books, \d+ hats, \d+ balls\)")
    return re.compile(r"^\[message\] " + text + "$")


def test_every_claim_and_deal_wording_occurs():
    chats = list(drills("dond", 400, seed=3))
    claims = [ch.messages[2]["content"] for ch in chats[::2]]
    deals = [ch.messages[2]["content"] for ch in chats[1::2]]
    for wording in CLAIMS:
        assert any(wording_pattern(wording).match(c) for c in claims), wording
    for wording in DEALS:
        assert any(wording_pattern(wording).match(d) for d in deals), wording


def test_drills_are_seeded_and_counted_exactly():
    first = [c.messages for c in drills("dond", 9, seed=3)]
    assert len(first) == 9
    assert first == [c.messages for c in drills("dond", 9, seed=3)]
    assert first != [c.messages for c in drills("dond", 9, seed=4)]


def test_bargaining_drill_options_are_refused_for_dond_before_any_game():
    with pytest.raises(ConfigError, match="--drills-far is for --game bargaining"):
        drills("dond", 4, seed=1, far=0.5)
    with pytest.raises(ConfigError, match="--drills-in-game is for --game bargaining"):
        drills("dond", 4, seed=1, in_game=True)


VALUES = re.compile(r"Your values: a book is worth (\d+), a hat (\d+) and a ball (\d+)")
ITEM = {"books": 0, "hats": 1, "balls": 2}


def test_refusal_drills_refuse_exactly_the_claims_that_leave_none_of_the_best_item():
    chats = list(drills("dond", 400, seed=5, refuse=True))
    assert len(chats) == 400
    refused = 0
    for claimant, accepter in zip(chats[::2], chats[1::2], strict=True):
        counts = tuple(map(int, POOL.search(accepter.messages[0]["content"]).groups()))
        values = tuple(map(int, VALUES.search(accepter.messages[0]["content"]).groups()))
        c = [m["content"] for m in claimant.messages[1:]]
        a = [m["content"] for m in accepter.messages[1:]]
        claimed = claim_in(c[1])
        offered = complement(counts, claimed)
        assert claimant.agreement and accepter.agreement
        top_left = [n for n, v in zip(offered, values, strict=True) if v == max(values)]
        if any(top_left):  # a unit of top value is left to it: it deals, as before
            assert deal_in(a[1]) == claimed and len(accepter.actions) == 2
            continue
        refused += 1
        # one item of top value, named; the counter-claim: the rest offered plus half of it
        top = values.index(max(values))
        assert values.count(max(values)) == 1
        item = re.search(r"I value the (\w+) most, and that leaves me none\.", a[1]).group(1)
        assert ITEM[item] == top
        wanted = list(offered)
        wanted[top] = max(1, counts[top] // 2)
        assert claim_in(a[1]) == tuple(wanted) and deal_in(a[1]) is None
        mine = tuple(map(int, VALUES.search(claimant.messages[0]["content"]).groups()))
        kept = complement(counts, tuple(wanted))
        assert sum(n * v for n, v in zip(kept, mine, strict=True)) > 0  # something it values
        # the claimant deals on the counter-claim; each seat proposes its own share
        assert deal_in(c[3]) == tuple(wanted)
        assert shares(c[5]) == [complement(counts, tuple(wanted))]
        assert shares(a[-1]) == [tuple(wanted)]
        assert (len(claimant.actions), len(accepter.actions)) == (3, 2)
    assert 0.2 < refused / 200 < 0.5  # a random claim takes all of it about two times in five


def test_refusal_drills_are_seeded_and_differ_from_perspective_drills():
    first = [c.messages for c in drills("dond", 40, seed=3, refuse=True)]
    assert first == [c.messages for c in drills("dond", 40, seed=3, refuse=True)]
    assert first != [c.messages for c in drills("dond", 40, seed=3)]


def test_refusals_are_refused_for_bargaining_drills():
    with pytest.raises(ConfigError, match="--drills-refuse is for --game dond"):
        drills("bargaining", 4, seed=1, refuse=True)


STATED = re.compile(r"a book is worth (\d+), a hat (\d+),? (?:and )?a ball (\d+)")


def joint(counts, share, mine, theirs) -> int:
    rest = complement(counts, share)
    return sum(n * v for n, v in zip(share, mine, strict=True)) + sum(
        n * v for n, v in zip(rest, theirs, strict=True)
    )


def test_joint_drills_state_values_and_end_on_a_joint_best_division():
    chats = list(drills("dond", 400, seed=5, joint=True))
    assert len(chats) == 400
    countered, openings = 0, set()
    for claimant, accepter in zip(chats[::2], chats[1::2], strict=True):
        assert objective_text(1) in claimant.messages[0]["content"]  # λ = 1 only
        counts = tuple(map(int, POOL.search(accepter.messages[0]["content"]).groups()))
        values = tuple(map(int, VALUES.search(accepter.messages[0]["content"]).groups()))
        mine = tuple(map(int, VALUES.search(claimant.messages[0]["content"]).groups()))
        c = [m["content"] for m in claimant.messages[1:]]
        a = [m["content"] for m in accepter.messages[1:]]
        # the claimant states its own values, then claims
        assert tuple(map(int, STATED.search(c[1]).groups())) == mine
        openings.add(c[1][: STATED.search(c[1]).start()])
        claimed = claim_in(c[1])
        best = max(joint(counts, s, values, mine) for s in divisions(counts))
        # every game ends on a division of the highest joint value, scored as such under λ = 1
        assert claimant.agreement and accepter.agreement
        assert claimant.score == accepter.score == best
        if joint(counts, complement(counts, claimed), values, mine) == best:
            assert deal_in(a[1]) == claimed and len(accepter.actions) == 2
            continue
        countered += 1
        # the accepter states its values and counter-claims: each type to who values it more,
        # a type both value the same as the claim offered it
        assert tuple(map(int, STATED.search(a[1]).groups())) == values
        assert "?" not in a[1]  # it does not ask for the values it has read
        offered = complement(counts, claimed)
        wanted = tuple(
            n if v > w else 0 if v < w else o
            for n, v, w, o in zip(counts, values, mine, offered, strict=True)
        )
        assert claim_in(a[1]) == wanted and deal_in(a[1]) is None
        assert deal_in(c[3]) == wanted
        assert shares(c[5]) == [complement(counts, wanted)] and shares(a[-1]) == [wanted]
        assert (len(claimant.actions), len(accepter.actions)) == (3, 2)
    assert 0.75 < countered / 200 < 0.98  # a random claim is rarely joint-best
    assert len(openings) == 2  # the values wordings vary ("My values:", "To be open, ...")


def test_joint_drills_are_seeded_and_not_combined_with_refusals():
    first = [c.messages for c in drills("dond", 20, seed=3, joint=True)]
    assert first == [c.messages for c in drills("dond", 20, seed=3, joint=True)]
    assert first != [c.messages for c in drills("dond", 20, seed=3, refuse=True)]
    with pytest.raises(ConfigError, match="--drills-refuse and --drills-joint"):
        drills("dond", 4, seed=1, refuse=True, joint=True)
    with pytest.raises(ConfigError, match="--drills-joint is for --game dond"):
        drills("bargaining", 4, seed=1, joint=True)


CHECK = re.compile(
    r"^\[message\] Books: (\d+) to me, (\d+) to you, so (\w+( \w+)?)\. "
    r"Hats: (\d+) to me, (\d+) to you, so (\w+( \w+)?)\. Balls: (\d+) to me, (\d+) to you, so "
    r"(\w+( \w+)?)\. "
)


def test_checked_joint_drills_write_the_check_first_in_both_answers_and_keep_the_divisions():
    checked = list(drills("dond", 300, seed=5, joint=True, check=True))
    plain = list(drills("dond", 300, seed=5, joint=True))
    deals = counters = 0
    for claimant, accepter, same in zip(checked[::2], checked[1::2], plain[1::2], strict=True):
        values = tuple(map(int, VALUES.search(accepter.messages[0]["content"]).groups()))
        stated = tuple(map(int, STATED.search(claimant.messages[2]["content"]).groups()))
        answer = accepter.messages[2]["content"]
        groups = CHECK.match(answer).groups()
        mine, theirs, verdict = groups[0::4], groups[1::4], groups[2::4]
        assert tuple(map(int, mine)) == values and tuple(map(int, theirs)) == stated
        assert verdict == tuple(
            "mine" if v > w else "yours" if v < w else "the same"
            for v, w in zip(values, stated, strict=True)
        )
        assert values_in(answer) is None  # the check replaces the values statement
        # the same division answered, dealt or counter-claimed, as without the check
        plain_answer = same.messages[2]["content"]
        assert (claim_in(answer), deal_in(answer)) == (
            claim_in(plain_answer),
            deal_in(plain_answer),
        )
        deals += deal_in(answer) is not None
        counters += claim_in(answer) is not None
        assert claimant.agreement and claimant.score == same.score
    assert deals > 5 and counters > 100  # both answers carry the check


REFUSAL_CHECK = re.compile(
    r"^\[message\] My best: (\w+(?: and \w+)*), (\d+) each\. Left to me: (\d+), so I (\w+)\. "
)


def test_checked_refusal_drills_write_the_check_first_in_both_branches_and_keep_the_divisions():
    checked = list(drills("dond", 400, seed=5, refuse=True, check=True))
    plain = list(drills("dond", 400, seed=5, refuse=True))
    decided = {"deal": 0, "refuse": 0}
    ties = 0
    pairs = zip(checked[::2], checked[1::2], plain[::2], plain[1::2], strict=True)
    for claimant, accepter, plain_claimant, same in pairs:
        counts = tuple(map(int, POOL.search(accepter.messages[0]["content"]).groups()))
        values = tuple(map(int, VALUES.search(accepter.messages[0]["content"]).groups()))
        offered = complement(counts, claim_in(claimant.messages[2]["content"]))
        answer = accepter.messages[2]["content"]
        named, value, left, verdict = REFUSAL_CHECK.match(answer).groups()
        best = [i for i, v in enumerate(values) if v == max(values)]
        assert [ITEM[item] for item in named.split(" and ")] == best
        ties += len(best) > 1
        assert int(value) == max(values)
        assert int(left) == sum(offered[i] for i in best)
        assert verdict == ("deal" if int(left) else "refuse")
        assert "most, and that leaves me none" not in answer  # the check replaces that line
        plain_answer = same.messages[2]["content"]
        assert (claim_in(answer), deal_in(answer)) == (
            claim_in(plain_answer),
            deal_in(plain_answer),
        )
        assert (deal_in(answer) is not None) == (verdict == "deal")
        assert (claimant.score, accepter.score) == (plain_claimant.score, same.score)
        assert claimant.messages[2] == plain_claimant.messages[2]
        decided[verdict] += 1
    assert decided["deal"] > 60 and decided["refuse"] > 40 and ties > 5


def test_the_check_is_for_joint_or_refusal_drills_only():
    with pytest.raises(ConfigError, match="--drills-check is for joint or refusal drills"):
        drills("dond", 4, seed=1, check=True)
    with pytest.raises(ConfigError, match="--drills-check is for --game dond"):
        drills("bargaining", 4, seed=1, check=True)


@pytest.mark.parametrize("kind", [{}, {"joint": True}, {"refuse": True}])
def test_drills_never_show_a_context_their_seed_holds_out_for_evaluation(kind):
    """`train selfplay --seed S` and `claim-probe --seed S` evaluate on the held-out side of
    split_contexts(contexts, S): drills made with --seed S are played on its training side only
    (about one context in ten is held out, so 150 games drawn from every context would show ~15)."""
    from stratagem.games.dond import all_contexts, split_contexts

    for seed in (42, 5):
        held_out = {
            (c.counts, tuple(sorted(c.values)))
            for c in split_contexts(all_contexts(), seed).held_out
        }
        chats = list(drills("dond", 300, seed=seed, **kind))
        seen = set()
        for claimant, accepter in zip(chats[::2], chats[1::2], strict=True):
            counts = tuple(map(int, POOL.search(claimant.messages[0]["content"]).groups()))
            pair = [
                tuple(map(int, VALUES.search(chat.messages[0]["content"]).groups()))
                for chat in (claimant, accepter)
            ]
            seen.add((counts, tuple(sorted(pair))))
        assert len(seen) > 100  # many contexts, not a handful
        assert not seen & held_out


def test_a_claims_flaw_is_the_units_its_two_shares_leave_to_no_one_or_give_to_both():
    claim = "You get (1 books, 0 hats, 0 balls) and I ask for (2 books, 1 hats, 1 balls)."
    assert claim_flaw((3, 1, 1), claim) is None
    assert claim_flaw((3, 1, 2), claim) == "That leaves 1 ball to no one."
    assert claim_flaw((2, 1, 1), claim) == "That gives 1 book to both of us."
    assert claim_flaw((3, 3, 0), claim) == (
        "That leaves 2 hats to no one. That gives 1 ball to both of us."
    )
    assert claim_flaw((3, 1, 1), "I want (2 books, 1 hats, 1 balls).") is None  # one share


def test_flawed_claim_drills_name_the_flaw_then_answer_the_share_claimed():
    chats = list(drills("dond", 600, seed=5, joint=True, flawed=True))
    assert len(chats) == 600
    claims = flawed = 0
    for claimant, accepter in zip(chats[::2], chats[1::2], strict=True):
        counts = tuple(map(int, POOL.search(accepter.messages[0]["content"]).groups()))
        values = tuple(map(int, VALUES.search(accepter.messages[0]["content"]).groups()))
        mine = tuple(map(int, STATED.search(claimant.messages[2]["content"]).groups()))
        best = max(joint(counts, s, values, mine) for s in divisions(counts))
        assert claimant.agreement and claimant.score == accepter.score == best  # still joint-best
        # the messages in the order written: opening, answer, (deal on a counter-claim)
        said = [m for m in accepter.messages[1:] if m["role"] == "assistant"]
        heard = [m for m in claimant.messages[1:] if m["role"] == "assistant"]
        dialogue = [x for pair in zip(heard, said, strict=False) for x in pair]
        dialogue = [m for m in dialogue if m["content"].startswith("[message]")]
        for message, reply in zip(dialogue, dialogue[1:] + [None], strict=True):
            text = message["content"]
            if claim_in(text) is None or deal_in(text) is not None:
                assert not message.get("refused")  # deals are always learned
                continue
            claims += 1
            written, claimed = shares(text)[-2:] if len(shares(text)) > 1 else (None, None)
            missing = [n - c - w for n, c, w in zip(counts, claimed, written, strict=True)]
            if not any(missing):
                assert not message.get("refused")
                assert not reply["content"].startswith(
                    ("[message] That leaves", "[message] That gives")
                )
                continue
            flawed += 1
            # the flawed claim stays in its writer's context without loss
            assert message.get("refused") is True
            # one unit of one item type off, named first by the seat that answers it, which then
            # answers the share claimed: a deal writing its true complement, or a counter-claim
            assert sorted(map(abs, missing)) == [0, 0, 1]
            item = ("book", "hat", "ball")[next(i for i, m in enumerate(missing) if m)]
            words = "to no one" if sum(missing) > 0 else "to both of us"
            flaw = f"That {'leaves' if sum(missing) > 0 else 'gives'} 1 {item} {words}."
            assert reply["content"].startswith(f"[message] {flaw} ")
            if deal_in(reply["content"]) is not None:
                assert deal_in(reply["content"]) == claimed
                assert shares(reply["content"])[1] == complement(counts, claimed) != written
    assert 0.25 < flawed / claims < 0.42  # a third of the claims, openings and counter-claims


def test_flawed_claims_are_for_joint_drills_only():
    with pytest.raises(ConfigError, match="--drills-flawed is for joint drills"):
        list(drills("dond", 4, seed=1, flawed=True))
    with pytest.raises(ConfigError, match="--drills-flawed is for joint drills"):
        list(drills("dond", 4, seed=1, refuse=True, flawed=True))
    with pytest.raises(ConfigError, match="--drills-flawed is for --game dond"):
        drills("bargaining", 4, seed=1, flawed=True)
