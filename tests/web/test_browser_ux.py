"""The play page in headless Chromium: a person is never stuck (a Leave button, the seconds the
model has been thinking, "Model unavailable, retry" past the model's deadline and a retry that
works) and the page's smaller courtesies (the message box keeps the focus, the hint after the
model proposed, the last-round warning, a confirmation before accepting at a loss, the model's
score at the end). Every test has a time limit, as in ``test_browser.py``."""

from __future__ import annotations

import re
import threading

import pytest

from stratagem.web.app import Limits
from stratagem.web.security import proxy_networks

from .conftest import last_user, scripted
from .proxy import ReverseProxy, second_loopback_works, self_signed
from .test_api import BARGAINING, dond_model
from .test_browser import dond_live, open_page, shot, wait_lines

pytestmark = pytest.mark.timeout(120)


def test_leave_ends_the_game_as_abandoned(browser, live, dond_contexts, artifacts):
    server, service = dond_live(live, dond_contexts)
    context, page, _ = open_page(browser, server.url)
    try:
        assert not page.is_visible("#leave")  # no game yet
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        page.click("#leave")
        assert page.inner_text("#confirm-leave-text") == (
            "Leave this game? It ends now and is recorded as abandoned."
        )
        page.click("#confirm-leave-no")  # changed their mind: nothing happened
        assert page.is_visible("#leave") and service.store.count() == 0
        page.click("#leave")
        page.click("#confirm-leave-yes")
        page.wait_for_function("() => document.querySelector('#banner').innerText.includes('left')")
        assert page.inner_text("#banner") == "You left this game."
        assert page.is_visible("#play-again") and not page.is_visible("#leave")
        assert page.locator("#message").count() == 0  # no controls over a finished game
        shot(page, artifacts, "serve-left.png")
        [row] = service.store.records()
        assert row.status == "abandoned" and row.trace.error == "abandoned"
        page.click("#play-again")
        page.wait_for_selector("#message:enabled")
        assert page.is_visible("#leave")
    finally:
        context.close()


def test_a_model_past_its_deadline_shows_the_retry_message(browser, live, dond_contexts, artifacts):
    slow = threading.Event()
    release = threading.Event()

    def model(chat):
        if slow.is_set():
            slow.clear()
            assert release.wait(60)
        return dond_model(chat)

    server, _ = live(
        "dond",
        agent=lambda g: scripted(g, model),
        params={"contexts": dond_contexts},
        seat=0,
        limits=Limits(model_timeout=2.5),
    )
    context, page, _ = open_page(browser, server.url)
    try:
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        n = page.locator("#dialogue li.model").count()
        slow.set()
        page.fill("#message", "Are you there?")
        page.click("#send")
        page.wait_for_selector("#elapsed")
        assert re.fullmatch(
            r"The model is thinking: [0-2] s \(it has up to 2\.5 s\)", page.inner_text("#elapsed")
        )
        page.wait_for_selector("#retry", timeout=20_000)
        assert page.inner_text("#unavailable") == (
            "Model unavailable, retry. The model gave no answer within 2.5 s."
        )
        shot(page, artifacts, "serve-deadline.png")
        release.set()
        page.click("#retry")
        wait_lines(page, "model", n + 1)
        page.wait_for_selector("#propose:enabled")
        page.fill("#keep-hats", "2")
        page.fill("#keep-balls", "1")
        page.click("#propose")
        page.wait_for_selector("#outcome")
        assert page.inner_text("#score") == "6"
    finally:
        release.set()
        context.close()


def test_dond_focus_hint_and_both_scores(browser, live, dond_contexts, artifacts):
    def model(chat):
        if "propose now" in last_user(chat):
            return "[propose] (2 books, 0 hats, 1 balls)"
        return dond_model(chat)

    server, _ = dond_live(live, dond_contexts, script=model)
    context, page, _ = open_page(browser, server.url)
    try:
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        n = page.locator("#dialogue li.model").count()
        page.fill("#message", "Hello there.")
        page.click("#send")
        wait_lines(page, "model", n + 1)
        page.wait_for_selector("#message:enabled")
        # the person goes on typing where they were: the box has the focus back
        page.wait_for_function("() => document.activeElement.id === 'message'")
        page.keyboard.type("Please propose now.")
        assert page.input_value("#message") == "Please propose now."
        page.keyboard.press("Enter")
        page.wait_for_selector("#dialogue li.model.note")  # the model's proposal, counts hidden
        page.wait_for_selector("#propose:enabled")
        assert page.is_disabled("#message")
        assert page.inner_text("#hint") == (
            "The model has submitted its proposal (hidden until the end): now submit yours. "
            "If the two proposals add up to the whole pool, that is the deal; otherwise no one "
            "scores."
        )
        page.fill("#keep-hats", "2")
        page.fill("#keep-balls", "1")
        page.click("#propose")
        page.wait_for_selector("#outcome")
        assert (page.inner_text("#score"), page.inner_text("#model-score")) == ("6", "8")
        shot(page, artifacts, "serve-dond-scores.png")
    finally:
        context.close()


def test_bargaining_last_round_confirmation_and_the_models_utility(browser, live, artifacts):
    script = (
        'Thought: low\nCode:\n```py\nsend_message(content="Cash now.")\nmake_offer(price=6500)\n```'
    )
    server, service = live(
        "bargaining",
        agent=lambda g: scripted(g, lambda chat: script),
        params={**BARGAINING, "max_rounds": 3},
        seat=0,
    )
    context, page, _ = open_page(browser, server.url)
    try:
        page.click("#new-game")
        page.wait_for_selector("#price:enabled")
        assert page.locator("#last-round").count() == 0  # round 1 of 3
        page.fill("#price", "7990")
        page.click("#offer")
        page.wait_for_selector("#accept:enabled")
        # round 3 of 3 is the person's: the last one
        assert page.inner_text("#last-round") == (
            "Last round: if no deal is made in this turn, the negotiation ends with no deal."
        )
        setup = next(iter(service.games.values())).episode.state.setup
        reservation, loss = setup.seller_value, setup.seller_value - 6500
        page.click("#accept")
        assert page.inner_text("#confirm-accept-text") == (
            f"Accepting $6500.00 is below your reservation value of ${reservation:.2f}: you would "
            f"lose ${loss:.2f}. Accept anyway?"
        )
        shot(page, artifacts, "serve-confirm-accept.png")
        page.click("#confirm-accept-no")
        assert page.locator("#confirm-accept").count() == 0 and service.store.count() == 0
        page.click("#accept")
        page.click("#confirm-accept-yes")
        page.wait_for_selector("#outcome")
        assert "Deal at $6500.00" in page.inner_text("#result-line")
        utility = setup.buyer_value - 6500
        assert (
            page.inner_text("#model-score") == ("-" if utility < 0 else "") + f"${abs(utility):.2f}"
        )
        [row] = service.store.records()
        assert row.status == "finished" and row.model_score == pytest.approx(utility)
    finally:
        context.close()


def test_a_whole_game_in_chromium_through_an_https_proxy(
    browser, live, dond_contexts, tmp_path, artifacts
):
    tls = self_signed(tmp_path)
    if tls is None or not second_loopback_works():
        pytest.skip("needs the openssl command and 127.0.0.2 (Linux loopback)")
    server, service = live(
        "dond",
        agent=lambda g: scripted(g, dond_model),
        params={"contexts": dond_contexts},
        seat=0,
        trusted_proxies=proxy_networks(["127.0.0.2"]),
    )
    proxy = ReverseProxy(server.port, source="127.0.0.2", proto="https", tls=tls)
    context = browser.new_context(ignore_https_errors=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        assert proxy.url.startswith("https://")
        page.goto(proxy.url)
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        n = page.locator("#dialogue li.model").count()
        page.fill("#message", "Hello through the proxy.")
        page.click("#send")
        wait_lines(page, "model", n + 1)
        page.wait_for_selector("#propose:enabled")
        page.fill("#keep-hats", "2")
        page.fill("#keep-balls", "1")
        page.click("#propose")
        page.wait_for_selector("#outcome")
        assert page.inner_text("#score") == "6"
        [cookie] = context.cookies()
        assert cookie["secure"] and cookie["httpOnly"]  # the page knew it was served over https
        shot(page, artifacts, "serve-behind-proxy.png")
        [row] = service.store.records()
        assert row.status == "finished" and proxy.forwarded >= 5
    finally:
        context.close()
        proxy.stop()
