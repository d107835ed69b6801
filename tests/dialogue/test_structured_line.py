"""The structured line is read where the protocol puts it (the last line), never negated, never
an echo of the answer format; meeting calendars have 3–5 free days."""

from __future__ import annotations

from collections import Counter

import pytest

from stratagem.games.dialogue import get_domain
from stratagem.games.dialogue.meeting import MAX_FREE, MIN_FREE


@pytest.fixture
def meeting():
    return get_domain("meeting")


@pytest.fixture
def fruit():
    return get_domain("fruit")


def test_an_echoed_answer_format_does_not_accept_a_meeting(meeting):
    s = meeting.scenario(0)
    echo = f"Let me see.\n{meeting.answer_format(s, 1)}"
    assert meeting.parse_line(echo) is None
    assert meeting.settle([s.opening, echo]) is None
    assert meeting.parse_line("PROPOSE: <day> or ACCEPT") is None


def test_a_negated_keyword_is_not_a_decision(meeting, fruit):
    s = meeting.scenario(0)
    assert meeting.parse_line("I will not ACCEPT that.") is None
    assert meeting.settle([s.opening, "I will not ACCEPT that."]) is None
    assert meeting.parse_line("I don't want to ACCEPT Monday.") is None
    assert fruit.parse_line("I will not ACCEPT that.") is None
    assert fruit.parse_line("I cannot REJECT such a fine offer. ACCEPT").kind == "accept"
    assert fruit.parse_line("No thanks.\nREJECT").kind == "reject"  # "No" is not a negation
    f = fruit.scenario(0)
    assert not fruit.ended(f, [f.opening, "I will not ACCEPT that."])


def test_only_the_last_line_holds_the_structured_line(meeting, fruit):
    assert meeting.parse_line("ACCEPT\nActually, let me check my calendar first.") is None
    assert meeting.parse_line("Hmm.\nPROPOSE: Friday").day == "Friday"
    assert fruit.parse_line("REJECT is what I almost said.\nTRADE: give 1 kiwi, receive 1 apple")
    assert fruit.parse_line("ACCEPT\nwait") is None
    s = fruit.scenario(0)
    echo = f"Hi.\n{fruit.answer_format(s, 1)}"
    assert fruit.parse_line(echo) is None


def test_meeting_calendars_have_three_to_five_free_days(meeting):
    counts = Counter(
        len(cal.free) for seed in range(4000) for cal in meeting.scenario(seed).private
    )
    assert set(counts) <= set(range(MIN_FREE, MAX_FREE + 1)), counts
    assert set(counts) == {3, 4, 5}
