"""The play page in headless Chromium (system package, driven by Playwright): a person types and
clicks through whole games, and the page keeps its promises (RELIABILITY I1, I3, I5, I10).

Each test saves a screenshot under the pytest temporary folder (``screenshots/``); with
``STRATAGEM_UPDATE_DOCS=1`` the Deal or No Deal one taken mid-game is also copied to
``docs/serve-dond.png`` (the README's). Every test has a time limit: a response body Chromium
never finished would otherwise wait forever.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from .conftest import ITEM, scripted
from .test_api import BARGAINING, SENTINEL, dond_model

pytestmark = pytest.mark.timeout(120)
DOCS = Path(__file__).resolve().parents[2] / "docs"
XSS = (
    '<img src=x onerror="window.__xss=1"> </script><script>window.__xss=2</script> '
    '<a href="javascript:window.__xss=3">click</a> <svg onload="window.__xss=4"></svg> {{7*7}}'
)


class Capture:
    """Every response a browser context received (bodies read at the end), and its websockets."""

    def __init__(self, context: Any):
        self.responses: list[Any] = []
        self.websockets: list[Any] = []
        context.on("response", lambda response: self.responses.append(response))
        context.on("page", lambda page: page.on("websocket", lambda ws: self.websockets.append(ws)))

    def everything(self) -> str:
        """Every body and header the browser got, as one text."""
        parts = []
        for response in self.responses:
            parts.append(json.dumps(response.all_headers()))
            try:
                parts.append(response.body().decode("utf-8", "replace"))
            except Exception:  # a redirect or an aborted load has no body
                continue
        return "\n".join(parts)


def open_page(browser: Any, url: str) -> tuple[Any, Any, Capture]:
    context = browser.new_context(viewport={"width": 900, "height": 900})
    capture = Capture(context)
    page = context.new_page()
    page.set_default_timeout(30_000)
    response = page.goto(url)
    assert response is not None and response.ok
    page.wait_for_selector("#new-game", state="visible")
    return context, page, capture


def wait_lines(page: Any, who: str, n: int) -> None:
    """Waits until the dialogue shows ``n`` lines of ``who`` (``you`` or ``model``)."""
    page.wait_for_function(
        "([who, n]) => document.querySelectorAll(`#dialogue li.${who}`).length >= n", arg=[who, n]
    )


def shot(page: Any, artifacts: Path, name: str) -> Path:
    path = artifacts / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5_000
    return path


def dond_live(live: Any, dond_contexts: str, script=dond_model, seat: int | None = 0):
    return live(
        "dond",
        agent=lambda g: scripted(g, script),
        params={"contexts": dond_contexts},
        seat=seat,
        spec="hf:scripted",
    )


def test_dond_full_game_typing_and_clicking(browser, live, dond_contexts, artifacts):
    server, service = dond_live(live, dond_contexts)
    context, page, capture = open_page(browser, server.url)
    try:
        assert page.inner_text("#title") == "Deal or No Deal"
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        values = page.locator("#items tbody td:nth-child(3)").all_inner_texts()
        assert values == ["1", "2", "2"]  # the person's own values only
        models = page.locator("#dialogue li.model").count()
        page.fill("#message", "I would like the hats and one ball; the books are yours.")
        page.click("#send")
        wait_lines(page, "model", models + 1)
        assert "Books matter most to me." in page.inner_text("#dialogue")
        page.wait_for_selector("#propose:enabled")
        page.fill("#keep-books", "0")
        page.fill("#keep-hats", "2")
        page.fill("#keep-balls", "1")
        page.fill("#message", "Deal: the books are yours, I keep the hats and a ball.")
        playing = shot(page, artifacts, "serve-dond-play.png")
        page.fill("#message", "")
        page.click("#propose")
        page.wait_for_selector("#outcome")
        assert page.inner_text("#score") == "6"
        assert "Deal! You keep 0 books, 2 hats, 1 balls: 6 points to you." in page.inner_text(
            "#result-line"
        )
        assert page.is_visible("#play-again")
        shot(page, artifacts, "serve-dond.png")
        if os.environ.get("STRATAGEM_UPDATE_DOCS") == "1":
            DOCS.mkdir(exist_ok=True)
            shutil.copy(playing, DOCS / "serve-dond.png")
        # I3: nothing the browser received holds the model's values or hidden reasoning
        everything = capture.everything()
        for leak in (SENTINEL, "my values are", "a book is worth 3", "worth 3"):
            assert leak not in everything, leak
        assert page.evaluate("document.cookie") == ""  # HttpOnly
        [cookie] = context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert capture.websockets == []
        [row] = service.store.records()
        assert row.status == "finished" and row.human_score == 6.0
        page.click("#play-again")  # a new game starts; the finished one stays stored once
        page.wait_for_function("() => document.querySelector('#outcome') === null")
        assert service.store.count() == 1
    finally:
        context.close()


def test_bargaining_deal(browser, live, artifacts):
    thought = "SECRET-THOUGHT-31d9"
    script = (
        f'Thought: {thought}\nCode:\n```py\nsend_message(content="A bit steep for me.")\n'
        "make_offer(price=7500)\n```"
    )
    server, service = live(
        "bargaining", agent=lambda g: scripted(g, lambda chat: script), params=BARGAINING, seat=0
    )
    context, page, capture = open_page(browser, server.url)
    try:
        page.click("#new-game")
        page.wait_for_selector("#price:enabled")
        assert page.inner_text("#item-title") == ITEM.title
        assert "seller" in page.inner_text("#role")
        page.fill("#message", "Restored by hand, works perfectly.")
        page.fill("#price", "7990")
        page.click("#offer")
        page.wait_for_selector("#accept:enabled")
        assert page.inner_text("#accept") == "Accept $7500.00"
        assert "A bit steep for me." in page.inner_text("#log")
        human = next(iter(service.games.values()))
        setup = human.episode.state.setup
        page.click("#accept")
        if setup.seller_value > 7500:  # below the person's reservation value: asked first
            assert page.is_visible("#confirm-accept")
            page.click("#confirm-accept-yes")
        else:
            assert page.locator("#confirm-accept").count() == 0
        page.wait_for_selector("#outcome")
        assert "Deal at $7500.00" in page.inner_text("#result-line")
        utility = 7500 - setup.seller_value
        assert page.inner_text("#score") == ("-" if utility < 0 else "") + f"${abs(utility):.2f}"
        shot(page, artifacts, "serve-bargaining.png")
        everything = capture.everything()
        for leak in (f"{setup.buyer_value:.2f}", repr(setup.buyer_value), thought):
            assert leak not in everything, leak
    finally:
        context.close()


def test_xss_from_the_model_and_the_person_renders_as_text(browser, live, dond_contexts, artifacts):
    def model(chat):
        return "[message] " + XSS

    server, _ = dond_live(live, dond_contexts, script=model)
    context, page, _ = open_page(browser, server.url)
    try:
        response = page.goto(server.url)
        assert "default-src 'self'" in response.headers["content-security-policy"]
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        models = page.locator("#dialogue li.model").count()
        page.fill("#message", XSS)
        page.click("#send")
        wait_lines(page, "model", models + 1)
        wait_lines(page, "you", 1)
        assert page.evaluate("window.__xss") is None
        for line in page.locator("#dialogue li .text").all_inner_texts():
            assert line == XSS
        assert (
            page.locator("#dialogue img, #dialogue a, #dialogue svg, #dialogue script").count() == 0
        )
        assert "49" not in page.inner_text("#dialogue")
        shot(page, artifacts, "serve-xss.png")
        assert page.evaluate("window.__xss") is None
    finally:
        context.close()


def test_two_browser_contexts_are_isolated(browser, live, dond_contexts, artifacts):
    server, service = dond_live(live, dond_contexts, seat=None)
    a, page_a, capture_a = open_page(browser, server.url)
    b, page_b, capture_b = open_page(browser, server.url)
    try:
        # A takes seat 0 through the page; B takes seat 1, then reloads: the page resumes it
        page_a.evaluate(
            "fetch('/api/games', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({seat: 0})})"
        )
        page_b.evaluate(
            "fetch('/api/games', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({seat: 1})})"
        )
        for page in (page_a, page_b):
            page.reload()
            page.wait_for_selector("#message:enabled")
        # bodies of a page navigated away from cannot be read back: capture from here on
        capture_a.responses.clear()
        capture_b.responses.clear()
        va = page_a.locator("#items tbody td:nth-child(3)").all_inner_texts()
        vb = page_b.locator("#items tbody td:nth-child(3)").all_inner_texts()
        assert (va, vb) == (["1", "2", "2"], ["3", "0", "2"])
        for page, text in ((page_a, "alpha-only-in-A"), (page_b, "bravo-only-in-B")):
            n = page.locator("#dialogue li.model").count()
            page.fill("#message", text)
            page.click("#send")
            wait_lines(page, "model", n + 1)
        assert "bravo" not in page_a.inner_text("body") and "alpha" not in page_b.inner_text("body")
        game_a = page_a.evaluate("fetch('/api/session').then(r => r.json()).then(j => j.live)")
        game_b = page_b.evaluate("fetch('/api/session').then(r => r.json()).then(j => j.live)")
        assert game_a != game_b
        # the body is read, or Chromium never finishes the response and its body cannot be read
        code = page_a.evaluate(
            f"fetch('/api/games/{game_b}').then(async r => {{ await r.text(); return r.status; }})"
        )
        assert code == 403  # A's cookie on B's game
        assert "bravo" not in capture_a.everything() and "alpha" not in capture_b.everything()
        for page in (page_a, page_b):
            page.fill("#keep-books", "0")
            page.fill("#keep-hats", "2")
            page.fill("#keep-balls", "1")
            page.click("#propose")
            page.wait_for_selector("#outcome")
        shot(page_b, artifacts, "serve-dond-seat1.png")
        rows = {r.game_id: r for r in service.store.records()}
        assert rows[game_a].human_seat == 0 and rows[game_b].human_seat == 1
        assert "alpha-only-in-A" in rows[game_a].trace.to_json()
        assert "bravo" not in rows[game_a].trace.to_json()
        assert "bravo-only-in-B" in rows[game_b].trace.to_json()
        assert {r.agent_spec for r in rows.values()} == {"hf:scripted"}
    finally:
        a.close()
        b.close()


def test_i10_model_unavailable_then_retry(browser, live, dond_contexts, artifacts):
    down = threading.Event()

    def flaky(chat):
        if down.is_set():
            raise ConnectionError("500 Internal Server Error")
        return dond_model(chat)

    server, _ = dond_live(live, dond_contexts, script=flaky)
    context, page, _ = open_page(browser, server.url)
    try:
        page.click("#new-game")
        page.wait_for_selector("#message:enabled")
        n = page.locator("#dialogue li.model").count()
        down.set()
        page.fill("#message", "Hello, are you there?")
        page.click("#send")
        page.wait_for_selector("#retry")
        assert "Model unavailable, retry" in page.inner_text("#banner")
        shot(page, artifacts, "serve-unavailable.png")
        down.clear()
        page.click("#retry")
        wait_lines(page, "model", n + 1)
        page.wait_for_selector("#propose:enabled")
        page.fill("#keep-hats", "2")
        page.fill("#keep-balls", "1")
        page.click("#propose")
        page.wait_for_selector("#outcome")
        assert page.inner_text("#score") == "6"
    finally:
        context.close()


def _click_until_over(page: Any, max_moves: int = 30) -> None:
    for _ in range(max_moves):
        page.wait_for_selector("#outcome, #actions button:enabled")
        if page.locator("#outcome").count():
            return
        version = page.evaluate("document.body.dataset.version")
        page.locator("#actions button:enabled").first.click()
        page.wait_for_function("v => document.body.dataset.version !== v", arg=version)
    raise AssertionError("the game did not end")


@pytest.mark.parametrize(
    ("game", "spec"), [("ipd", "strategy:TitForTat"), ("kuhn", "strategy:NashApprox")]
)
def test_choice_games_play_to_the_end(browser, live, artifacts, game, spec):
    server, service = live(game, spec=spec)
    context, page, _ = open_page(browser, server.url)
    try:
        page.click("#new-game")
        _click_until_over(page)
        [row] = service.store.records()
        assert page.inner_text("#score") == f"{row.human_score:g}"
        shot(page, artifacts, f"serve-{game}.png")
    finally:
        context.close()
