"""Every registered text game is served and played to its end screen in headless Chromium, with a
rule-based agent as the opponent — the games with a dedicated board and those the generic text
board shows, including two toy games registered here (one token game, one free-form game).

The person's moves come from a rule-based strategy too: at each of the person's turns the test
asks a strategy for the decision at the person's observation and makes it through the page
(clicking the token's button, typing the free-form answer, filling the board's forms), so each
game runs through its own rules to the end instead of a scripted sequence of clicks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from stratagem.agent import Strategy
from stratagem.game import Observation, answer_text
from stratagem.games import game_names, get_game
from stratagem.strategies import get_pools, get_strategy
from stratagem.web.boards import BOARDS, TextBoard, board_for
from stratagem.web.service import PlayService

from .conftest import TOYS
from .test_browser import open_page, shot

pytestmark = pytest.mark.timeout(240)


def opponents(game: str) -> tuple[str, str]:
    """The model's strategy and the person's: the first two of the game's training pool."""
    train = get_pools(game).train
    return train[0], train[1 % len(train)]


# ---- the person's moves, per board (the script of the page that draws it) ----


def text_move(page: Any, obs: Observation, action: Any, game: Any) -> None:
    if obs.legal:
        page.click(f"#action-{obs.legal.index(game.token(action))}")
    else:
        page.fill("#answer", answer_text(game, action))
        page.click("#send")


def choice_move(page: Any, obs: Observation, action: Any, game: Any) -> None:
    page.click(f"#action-{game.token(action)}")


def dond_move(page: Any, obs: Observation, action: Any, game: Any) -> None:
    from stratagem.games.dond import Say

    if isinstance(action, Say):
        page.fill("#message", action.text)
        page.click("#send")
        return
    for name, count in zip(("books", "hats", "balls"), action.share, strict=True):
        page.fill(f"#keep-{name}", str(count))
    page.click("#propose")


def bargaining_move(page: Any, obs: Observation, action: Any, game: Any) -> None:
    calls = {call.name: call for call in action.calls}
    message = calls["send_message"].arg("content") if "send_message" in calls else ""
    page.fill("#message", message)
    if "make_offer" in calls:
        page.fill("#price", f"{calls['make_offer'].arg('price'):.2f}")
        page.click("#offer")
    elif "respond_to_offer" in calls:
        page.click("#accept" if calls["respond_to_offer"].arg("response") else "#reject")
    elif "quit_negotiation" in calls:
        page.click("#quit")
    else:  # waiting or searching only: the page says something instead
        page.fill("#message", message or "Let me think about it.")
        page.click("#send")


MOVES: dict[str, Callable[[Any, Observation, Any, Any], None]] = {
    "text": text_move,
    "ipd": choice_move,
    "kuhn": choice_move,
    "dond": dond_move,
    "bargaining": bargaining_move,
}


def play_to_the_end(page: Any, service: PlayService, person: Strategy, max_moves: int = 80):
    """Plays the person's seat with ``person`` through the page until the end screen."""
    move = MOVES[service.board.kind]
    page.click("#new-game")
    for _ in range(max_moves):
        page.wait_for_function(
            "() => document.querySelector('#outcome') !== null || "
            "document.getElementById('banner').textContent.startsWith('Your')"
        )
        if page.locator("#outcome").count():
            return
        [human] = service.games.values()
        with human.lock:
            obs = human.waiting(human.human_seat)
        assert obs is not None
        version = page.evaluate("document.body.dataset.version")
        move(page, obs, person.act([obs])[0].action, service.game)
        page.wait_for_function(
            "v => document.body.dataset.version !== v || "
            "document.getElementById('error').textContent !== ''",
            arg=version,
        )
        assert page.inner_text("#error") == "", page.inner_text("#error")
    raise AssertionError("the game did not end")


def check_end(page: Any, service: PlayService) -> None:
    [row] = service.store.records()
    assert row.status == "finished" and row.trace.status == "complete"
    assert page.is_visible("#play-again")
    if service.board.kind in ("text", "ipd", "kuhn"):
        assert page.inner_text("#score") == f"{row.human_score:g}"


def play_game(browser, live, artifacts, game: str, seat: int) -> None:
    model, person = opponents(game)
    server, service = live(game, spec=f"strategy:{model}", seat=seat)
    assert service.board is board_for(game)
    context, page, _ = open_page(browser, server.url)
    try:
        if service.board.kind == "text":
            assert page.inner_text("#title") == game
        play_to_the_end(page, service, get_strategy(game, person))
        check_end(page, service)
        shot(page, artifacts, f"serve-every-{game}-{seat}.png")
    finally:
        context.close()


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("game", game_names())
def test_every_registered_game_plays_to_the_end(browser, live, artifacts, game, seat):
    play_game(browser, live, artifacts, game, seat)


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("game", [toy.name for toy in TOYS])
def test_a_toy_game_registered_here_plays_to_the_end(browser, live, artifacts, toys, game, seat):
    assert isinstance(board_for(game), TextBoard) and game not in BOARDS
    play_game(browser, live, artifacts, game, seat)


def test_a_refused_free_form_answer_shows_the_games_reason(browser, live, toys):
    server, service = live("wordhunt", spec="strategy:AlwaysStag", seat=0)
    context, page, _ = open_page(browser, server.url)
    try:
        page.click("#new-game")
        page.wait_for_selector("#answer:enabled")
        assert "STAG or HARE" in page.inner_text("#rules")
        page.fill("#answer", "a rabbit, I think")
        page.click("#send")
        page.wait_for_function("() => document.getElementById('error').textContent !== ''")
        assert page.inner_text("#error") == "end your answer with STAG or HARE"
        [human] = service.games.values()
        assert [d.seat for d in human.episode.decisions] == [1]  # the model's only
        assert human.episode.rounds == []
        page.fill("#answer", "Together then.\nSTAG")
        page.click("#send")
        page.wait_for_function("() => document.querySelectorAll('#dialogue li.you').length == 1")
        # the conversation holds the answer as the game read it (its canonical answer text)
        assert page.inner_text("#dialogue li.you .text") == "I will hunt the stag.\nSTAG"
        assert page.inner_text("#points") == "Your points: +4 (total 4)."
    finally:
        context.close()


# ---- ``stratagem serve`` starts for every registered game ----


@pytest.mark.parametrize("game", [*game_names(), *(toy.name for toy in TOYS)])
def test_serve_starts_for_every_registered_game(game, toys, tmp_path, monkeypatch):
    import uvicorn
    from fastapi.testclient import TestClient

    from stratagem.cli.main import app

    started: list[Any] = []

    def run(app: Any, **kwargs: Any) -> None:  # uvicorn's place: the app answers, then stops
        with TestClient(app, base_url="http://127.0.0.1:8000") as client:
            started.append(client.get("/api/session").json())

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.chdir(tmp_path)
    model, _ = opponents(game)
    result = CliRunner().invoke(app, ["serve", "--game", game, "--agent", f"strategy:{model}"])
    assert result.exit_code == 0, result.output
    [session] = started
    assert session["game"] == game and session["board"] == board_for(game).kind
    assert session["agent"] == model
    assert get_game(game).name == game
