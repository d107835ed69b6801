"""A study session in headless Chromium: one participant (``?pid=``) accepts the consent text,
plays three Deal or No Deal games, sees the counter and running total grow and both scores of
the last game, and a reload keeps the result on screen; a page left open over a game the server
no longer holds says so and offers a new game."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stratagem.games import get_game
from stratagem.web.app import PlayService, create_app
from stratagem.web.storage import GameStore
from stratagem.web.study import Study

from .conftest import KEY, LiveServer, scripted
from .test_api import dond_model
from .test_browser import shot, wait_lines

pytestmark = pytest.mark.timeout(180)
TERMS = "This study is about negotiation.\nPress the button below to agree and begin."


@pytest.fixture
def study_live(tmp_path: Path, dond_contexts: str):
    """A live Deal or No Deal server (the person in seat 0, a scripted model) for a study."""
    servers = []

    def make(study: Study, clock: Any = None) -> tuple[LiveServer, PlayService]:
        game = get_game("dond", contexts=dond_contexts)
        kw = {"clock": clock} if clock else {}
        service = PlayService(
            game, scripted(game, dond_model), "hf:scripted", GameStore(tmp_path / "study.db"),
            KEY, human_seat=0, study=study, **kw,
        )  # fmt: skip
        server = LiveServer(create_app(service))
        servers.append(server)
        return server, service

    yield make
    for server in servers:
        server.stop()


def play(page: Any) -> None:
    """One Deal or No Deal game through the page: a message, then the complementary proposal."""
    page.click("#new-game" if page.is_visible("#new-game") else "#play-again")
    page.wait_for_selector("#message:enabled")
    models = page.locator("#dialogue li.model").count()
    page.fill("#message", "The hats and a ball for me, the books for you.")
    page.click("#send")
    wait_lines(page, "model", models + 1)  # the model has answered: the person's turn again
    page.wait_for_selector("#propose:enabled")
    page.fill("#keep-books", "0")
    page.fill("#keep-hats", "2")
    page.fill("#keep-balls", "1")
    page.click("#propose")
    page.wait_for_selector("#outcome")


def counters(page: Any, games: int, total: str) -> None:
    page.wait_for_function(
        "([g, t]) => document.querySelector('#study-games')?.textContent === g"
        " && document.querySelector('#study-total').textContent === t",
        arg=[str(games), total],
    )


def test_a_participant_plays_three_games(browser, study_live, artifacts):
    server, service = study_live(Study(consent=TERMS, ask_participant=True))
    context = browser.new_context(viewport={"width": 900, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(server.url + "/?pid=P-042")
        page.wait_for_selector("#study-gate")
        assert "This study is about negotiation." in page.inner_text("#consent-text")
        assert page.input_value("#participant") == "P-042"
        assert not page.is_visible("#new-game")  # nothing to start before the terms
        shot(page, artifacts, "serve-study-consent.png")
        page.click("#agree")
        page.wait_for_selector("#new-game", state="visible")
        assert page.query_selector("#study-gate") is None
        assert "Participant P-042" in page.inner_text("#study")
        counters(page, 0, "0")
        for n in (1, 2, 3):
            play(page)
            counters(page, n, str(6 * n))
            assert page.inner_text("#score") == "6"
            assert page.inner_text("#study-last") == "Last game: you 6, the model 8."
            if n < 3:
                page.reload()
                page.wait_for_selector("#outcome")  # the result survives the reload
                assert page.inner_text("#score") == "6"
                assert "You keep 0 books, 2 hats, 1 balls" in page.inner_text("#result-line")
                assert page.query_selector("#study-gate") is None  # consent is not asked again
                counters(page, n, str(6 * n))
        shot(page, artifacts, "serve-study.png")
        page.reload()
        page.wait_for_selector("#outcome")
        counters(page, 3, "18")
        assert page.inner_text("#study-last") == "Last game: you 6, the model 8."
        records = service.store.records()
        assert [(r.participant, r.status, r.human_score) for r in records] == [
            ("P-042", "finished", 6.0)
        ] * 3
    finally:
        context.close()


def test_a_short_form_asks_for_the_participant_id(browser, study_live):
    server, service = study_live(Study(ask_participant=True))
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(server.url)
        page.wait_for_selector("#participant")
        assert page.query_selector("#consent-text") is None
        page.fill("#participant", "not valid!")
        page.click("#agree")
        page.wait_for_function("() => document.querySelector('#study-error').textContent !== ''")
        assert "participant id" in page.inner_text("#study-error")
        page.fill("#participant", "S12")
        page.click("#agree")
        page.wait_for_selector("#new-game", state="visible")
        play(page)
        counters(page, 1, "6")
        assert [r.participant for r in service.store.records()] == ["S12"]
    finally:
        context.close()


def test_a_page_over_a_game_the_server_forgot_says_so(browser, study_live):
    now = [0.0]
    server, service = study_live(Study(), clock=lambda: now[0])
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        page.goto(server.url)
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        gid = next(iter(service.games))
        page.fill("#message", "one moment")
        now[0] += 100_000
        service.reap()  # idle: stored as abandoned and forgotten
        page.click("#send")
        page.wait_for_selector("#new-game", state="visible")
        banner = page.inner_text("#banner")
        assert (
            banner == "This game is no longer on the server (it was abandoned). Start a new game."
        )
        assert page.query_selector("#message") is None  # the dead board is gone
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        assert next(g for g in service.games if g != gid)
    finally:
        context.close()
