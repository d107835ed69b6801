"""The three dialogue domains: scenarios, structured lines, settlement and exact payoffs."""

from __future__ import annotations

import pytest

from stratagem.errors import ConfigError, UnknownNameError
from stratagem.games.dialogue import DOMAINS, OUTCOMES, get_domain
from stratagem.games.dialogue.fruit import Basket
from stratagem.games.dialogue.meeting import DAYS, Calendar


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_scenarios_are_seeded_and_private_information_stays_private(name):
    domain = get_domain(name)
    a, b = domain.scenario(7), domain.scenario(7)
    assert a == b and domain.scenario(8) != a
    assert a.names[0] != a.names[1] and a.opening
    for seat in (0, 1):
        mine = domain.situation(a, seat)
        theirs = domain.situation(a, 1 - seat)
        chat = domain.chat(a, (a.opening, "Hello.")[: 2 - seat], seat, domain.instructions[0])
        text = "\n".join(m["content"] for m in chat)
        assert mine in text and (theirs == mine or theirs not in text)
        assert chat[-1]["role"] == "user" and "Note for" in chat[-1]["content"]


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_every_instruction_renders_and_any_is_the_baseline(name):
    domain = get_domain(name)
    assert "any" in domain.instructions
    s = domain.scenario(1)
    texts = {domain.instruction_text(i, s, 1) for i in domain.instructions}
    assert len(texts) == len(domain.instructions)


def test_unknown_domain_and_bad_instructions_are_refused():
    with pytest.raises(UnknownNameError, match="did you mean 'fruit'"):
        get_domain("fruits")
    with pytest.raises(ConfigError, match="days"):
        get_domain("meeting", ["Funday"])


def test_meeting_offers_every_day_and_any_as_in_the_paper():
    # regression: two days and "any" where seed 003 offers the seven days and "any"
    assert get_domain("meeting").instructions == (*DAYS, "any")
    assert len(DAYS) == 7


def meeting_scenario():
    alice = Calendar(("Monday", "Wednesday"), {"Monday": 5, "Wednesday": 9})
    bob = Calendar(("Wednesday", "Friday"), {"Wednesday": 3, "Friday": 7})
    domain = get_domain("meeting")
    return domain, domain.scenario(0).__class__(
        "meeting", 0, ("Alice", "Bob"), (alice, bob), "PROPOSE: Monday"
    )


def test_meeting_lines_and_settlement():
    domain, s = meeting_scenario()
    assert domain.parse_line("Sure.\nPROPOSE: wednesday").day == "Wednesday"
    assert domain.parse_line("PROPOSE: Monday then ACCEPT").kind == "accept"  # the last one
    assert domain.parse_line("I accept, maybe.") is None  # ACCEPT is an upper-case keyword
    assert domain.settle(["PROPOSE: Monday", "ACCEPT"]) == "Monday"
    assert domain.settle(["PROPOSE: Monday", "PROPOSE: Wednesday", "PROPOSE: Wednesday"]) == (
        "Wednesday"
    )
    assert domain.settle(["Hi", "ACCEPT"]) is None  # nothing to accept
    assert domain.settle(["PROPOSE: Monday", "PROPOSE: Friday"]) is None
    assert domain.payoff(s, ["PROPOSE: Wednesday", "ACCEPT"]) == (9.0, 3.0)
    assert domain.payoff(s, ["PROPOSE: Monday", "ACCEPT"]) == (0.0, 0.0)  # Bob is not free
    assert domain.ended(s, ["PROPOSE: Monday", "ACCEPT"])
    assert not domain.ended(s, ["PROPOSE: Monday", "PROPOSE: Friday"])
    assert domain.follows(s, ["PROPOSE: Monday", "PROPOSE: Friday"], "Friday")
    assert domain.follows(s, ["PROPOSE: Monday", "ACCEPT"], "Monday")
    assert not domain.follows(s, ["PROPOSE: Monday", "ACCEPT"], "Friday")


def fruit_scenario():
    domain = get_domain("fruit")
    alice = Basket(
        {"apple": 2, "banana": 0, "blueberry": 1, "kiwi": 3},
        {"apple": 2, "banana": 9, "blueberry": 1, "kiwi": 1},
    )
    bob = Basket(
        {"apple": 0, "banana": 2, "blueberry": 0, "kiwi": 0},
        {"apple": 6, "banana": 3, "blueberry": 2, "kiwi": 1},
    )
    return domain, domain.scenario(0).__class__(
        "fruit", 0, ("Alice", "Bob"), (alice, bob), "TRADE: give 2 apple, receive 1 banana"
    )


def test_fruit_lines_settlement_and_payoffs():
    domain, s = fruit_scenario()
    line = domain.parse_line("Deal?\nTRADE: give 2 kiwis, receive 1 Banana")
    assert (line.kind, line.give, line.receive) == ("trade", (2, "kiwi"), (1, "banana"))
    assert domain.parse_line("TRADE: give 1 blueberries, receive 2 apples").give == (
        1,
        "blueberry",
    )
    assert domain.parse_line("No thanks.\nREJECT").kind == "reject"
    # Alice gives 2 apples (worth 2 each to her, 6 to Bob) for 1 banana (9 to her, 3 to Bob)
    assert domain.payoff(s, [s.opening, "ACCEPT"]) == (9 - 4, 12 - 3)
    assert domain.payoff(s, [s.opening, "REJECT"]) == (0.0, 0.0)
    assert domain.ended(s, [s.opening, "REJECT"])
    # Bob's counter-offer replaces Alice's; Alice accepts it: Bob gives 1 banana for 1 kiwi
    moves = [s.opening, "TRADE: give 1 banana, receive 1 kiwi", "ACCEPT"]
    assert domain.payoff(s, moves) == (9 - 1, 1 - 3)
    # Bob accepting his own offer does nothing; an offer Bob cannot pay pays nothing
    assert not domain.ended(s, [s.opening, "TRADE: give 1 banana, receive 1 kiwi"])
    assert domain.payoff(s, ["TRADE: give 1 kiwi, receive 3 banana", "ACCEPT"]) == (0.0, 0.0)
    assert domain.payoff(s, [s.opening, "Let me think."]) == (0.0, 0.0)


def test_debate_has_no_exact_payoff_and_parses_verdicts():
    domain = get_domain("debate")
    s = domain.scenario(2)
    a, b = s.names
    assert domain.payoff(s, [s.opening, "x"]) is None
    assert domain.parse_judgement(s, [f"Good round.\nWINNER: {b}"]).value == (-1.0, 1.0)
    assert domain.parse_judgement(s, [f"{a}"]).value == (1.0, -1.0)
    failed = domain.parse_judgement(s, [f"{a} and {b} were equal"])
    assert failed.value is None and failed.status == "failed"
    with pytest.raises(ConfigError):
        domain.templated(0, "valid")


@pytest.mark.parametrize("name", ["meeting", "fruit"])
@pytest.mark.parametrize("outcome", OUTCOMES)
def test_templated_dialogues_have_known_payoffs(name, outcome):
    domain = get_domain(name)
    for seed in range(20):
        s, messages = domain.templated(seed, outcome)
        truth = domain.exact_payoff(s, messages, outcome)
        assert len(messages) == 2 and domain.parse_line(messages[1]) is None
        if outcome != "valid":
            assert truth == (0.0, 0.0)
        else:
            lo, hi = domain.payoff_range
            assert all(lo <= v <= hi for v in truth)
            if name == "meeting":
                assert min(truth) > 0  # a day both are free


def test_clean_cuts_the_other_seats_turn_and_own_name():
    domain, s = meeting_scenario()
    text = "Bob: Fine by me.\nPROPOSE: Wednesday\nAlice: great\nmore"
    assert domain.clean(text, s, 1) == "Fine by me.\nPROPOSE: Wednesday"
    echo = "Sure.\nPROPOSE: Friday\n\n(Note for Bob's reply: push for Friday.)"
    assert domain.clean(echo, s, 1) == "Sure.\nPROPOSE: Friday"  # the note is private
    assert domain.stop("Fine.\nPROPOSE: Wednesday") and not domain.stop("PROPOSE: Wed")
