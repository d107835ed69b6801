"""One browser, one person after another (headless Chromium): participant A by a ``?pid=`` link
accepts the terms and plays; the next link, ``?pid=B``, shows B the consent, not A's game; and
while A's game is still in play the page says what to do (continue it, or leave it and start as
B), never a blank page."""

from __future__ import annotations

import pytest

from stratagem.web.issued import code_of
from stratagem.web.study import Study

from .conftest import KEY
from .test_study_browser import TERMS, counters, play, study_live  # noqa: F401 (a fixture)

pytestmark = pytest.mark.timeout(180)


def test_b_sees_the_consent_not_as_game(browser, study_live):  # noqa: F811
    server, service = study_live(Study(consent=TERMS, ask_participant=True))
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(server.url + "/?pid=A")
        page.click("#agree")
        page.wait_for_selector("#new-game", state="visible")
        play(page)
        counters(page, 1, "6")
        page.goto(server.url + "/?pid=B")
        page.wait_for_selector("#study-gate")
        assert "This study is about negotiation." in page.inner_text("#consent-text")
        assert page.input_value("#participant") == "B"
        assert not page.is_visible("main")
        page.wait_for_function("() => document.querySelector('#board').children.length === 0")
        assert page.query_selector("#outcome") is None and page.query_selector("#dialogue") is None
        assert "Participant B" in page.inner_text("#study")
        assert page.inner_text("#study-games") == "0"
        page.click("#agree")
        page.wait_for_selector("#new-game", state="visible")
        play(page)
        counters(page, 1, "6")
        rows = service.store.records()
        assert [(r.participant, r.status) for r in rows] == [("A", "finished"), ("B", "finished")]
        sha = Study(TERMS).consent_sha256
        assert [r.consent["sha256"] for r in rows if r.consent] == [sha, sha]
    finally:
        context.close()


def test_a_game_in_play_is_answered_on_the_page(browser, study_live):  # noqa: F811
    server, service = study_live(Study(consent=TERMS, ask_participant=True))
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(server.url + "/?pid=A")
        page.click("#agree")
        page.wait_for_selector("#new-game", state="visible")
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")  # A walks away mid-game
        for _ in range(2):  # the next person's link, and a reload of it
            page.goto(server.url + "/?pid=B")
            page.wait_for_selector("#study-switch")
            assert page.inner_text("#switch-text") == (
                "This link is for participant B. Participant A's game is still in play in this "
                "browser; starting as B ends it (it is recorded as abandoned)."
            )
            assert not page.is_visible("main")
        page.click("#switch-continue")  # finish A's game first
        page.wait_for_selector("#message:enabled")
        assert page.is_visible("#switch-start")
        page.click("#switch-start")
        page.wait_for_selector("#study-gate")
        assert "This study is about negotiation." in page.inner_text("#consent-text")
        assert page.query_selector("#study-switch") is None
        assert page.query_selector("#message") is None  # A's board is gone
        [row] = service.store.records()
        assert (row.participant, row.status) == ("A", "abandoned")
        page.click("#agree")
        page.wait_for_selector("#new-game", state="visible")
        assert errors == []
    finally:
        context.close()


def test_an_issued_link_is_one_participant_across_reloads(browser, study_live):  # noqa: F811
    server, service = study_live(Study(consent=TERMS, issued_ids=True))
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(server.url + f"/?pid=P001.{code_of(KEY, 'P001')}")
        page.click("#agree")
        page.wait_for_selector("#new-game", state="visible")
        play(page)
        counters(page, 1, "6")
        page.reload()
        page.wait_for_selector("#outcome")
        assert "Participant P001" in page.inner_text("#study")
        assert page.query_selector("#study-switch") is None
        assert page.query_selector("#study-gate") is None
        page.goto(server.url + "/?pid=P002.aaaaaaaaaa")  # a link with a wrong code
        page.wait_for_selector("#study-notice")
        assert page.inner_text("#study-notice") == (
            "The link's participant id was refused: this participant id is not one issued for "
            "this study; use the link you were given"
        )
        assert not page.is_visible("main")
        assert [r.participant for r in service.store.records()] == ["P001"]
    finally:
        context.close()
