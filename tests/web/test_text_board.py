"""The generic text board through the API and in Chromium: it shows only what a model in the
person's seat would read, refuses bad input with nothing changed, and renders every text —
the game's prompts, the model's words quoted in them — as text."""

from __future__ import annotations

import json

import pytest

from stratagem.game import answer_text
from stratagem.strategies import get_pools, get_strategy
from stratagem.web.boards import BOARDS, TextBoard, board_for

from .conftest import scripted
from .test_browser import XSS, open_page, shot, wait_lines

TEXT_GAMES = [g for g in ("auction", "multi_issue", "negotiation") if g not in BOARDS]


def play_through_the_api(server, person, seat):
    """Plays the person's seat with the strategy ``person``; returns every response body."""
    bodies = []
    state = server.new_game(seat=seat)
    bodies.append(json.dumps(state))
    gid = state["game_id"]
    human = server.human(gid)
    while not state["over"]:
        assert state["your_turn"], state
        obs = human.waiting(human.human_seat)
        action = person.act([obs])[0].action
        body = (
            {"action": server.service.game.token(action)}
            if obs.legal
            else {"text": answer_text(server.service.game, action)}
        )
        r = server.turn(gid, body)
        assert r.status_code == 200, r.text
        bodies.append(r.text)
        state = server.settle(gid)
        bodies.append(json.dumps(state))
    return state, bodies


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("game", TEXT_GAMES)
def test_i3_the_person_sees_only_their_own_seat(serve, game, seat, monkeypatch):
    # a served game draws its seed at random; a rare draw gives both seats the same prompts, which
    # leaves nothing secret to look for, so the test pins the draw
    monkeypatch.setattr("stratagem.web.service.secrets.randbits", lambda bits: 20261127)
    model, person = get_pools(game).train[:2]
    server = serve(game, spec=f"strategy:{model}", seat=seat)
    assert isinstance(server.service.board, TextBoard)
    state, bodies = play_through_the_api(server, get_strategy(game, person), seat)
    human = next(iter(server.service.games.values()))
    episode = human.episode
    mine = {m.content for m in episode.chat(seat)}
    theirs = [m.content for m in episode.chat(1 - seat) if m.role == "user"]
    secret = [c for c in theirs if c not in mine]
    assert secret, "the seats read the same prompts: nothing to check"
    everything = "\n".join(bodies)
    for text in secret:
        assert json.dumps(text)[1:-1] not in everything, text
    if episode.rules(1 - seat) != episode.rules(seat):
        assert json.dumps(episode.rules(1 - seat))[1:-1] not in everything
    # finished rounds and the end screen: the person's own moves and points only
    assert state["outcome"] == {
        "rounds": len(episode.rounds),
        "your_total": sum(r.payoffs[seat] for r in episode.rounds),
    }
    for row in state["board"]["rounds"]:
        assert set(row) == {"you", "your_points"}
    [record] = server.service.store.records()
    assert record.status == "finished" and record.human_score == state["outcome"]["your_total"]


@pytest.mark.parametrize(
    "body",
    [
        {"action": "NOPE"},
        {"action": 1},
        {"action": "HARE", "extra": 1},
        {"text": "HARE"},
        {},
        [],
        "HARE",
        {"action": "H" * 201},
    ],
)
def test_i4_token_turns_take_only_a_legal_token(serve, toys, body):
    server = serve("staghunt", spec="strategy:AlwaysStag", seat=0)
    gid = server.new_game()["game_id"]
    before = server.settle(gid)
    r = server.turn(gid, body)
    assert r.status_code == 422, r.text
    assert server.settle(gid) == before
    assert [d.seat for d in server.human(gid).episode.decisions] == [1]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"text": "a rabbit"}, "end your answer with STAG or HARE"),
        ({"text": " \u202e\u0000 "}, "the answer is empty"),
        ({"text": "x" * 1001}, "text: "),
        ({"text": 5}, "text: "),
        ({"action": "STAG"}, "text: "),
        ({"text": "STAG", "action": "STAG"}, "action: "),
    ],
)
def test_i4_free_form_turns_are_read_by_the_game_or_refused(serve, toys, body, detail):
    server = serve("wordhunt", spec="strategy:AlwaysStag", seat=0)
    gid = server.new_game()["game_id"]
    before = server.settle(gid)
    r = server.turn(gid, body)
    assert r.status_code == 422 and r.json()["detail"].startswith(detail), r.text
    assert server.settle(gid) == before
    r = server.turn(gid, {"text": "Hare\u202e today,\r\n\u0007 then HARE"})
    assert r.status_code == 200, r.text
    state = server.settle(gid)
    assert state["board"]["rounds"] == [{"you": ["HARE"], "your_points": 3.0}]


def test_an_unknown_game_has_no_board():
    with pytest.raises(Exception, match="unknown game for the play page 'meeting'"):
        board_for("meeting")


def test_a_free_form_game_on_the_text_board_renders_the_models_words_as_text(
    browser, live, dond_contexts, artifacts
):
    # Deal or No Deal has its own board; shown by the text board, its turns are free-form text
    server, service = live(
        "dond",
        agent=lambda g: scripted(g, lambda chat: "[message] " + XSS),
        params={"contexts": dond_contexts},
        seat=0,
        spec="hf:scripted",
    )
    service.board = TextBoard()
    context, page, _ = open_page(browser, server.url)
    try:
        assert page.inner_text("#title") == "dond"
        page.click("#new-game")
        page.wait_for_selector("#answer:enabled")
        page.fill("#answer", "[message] " + XSS)
        page.click("#send")
        wait_lines(page, "you", 1)
        page.wait_for_function(
            "() => document.getElementById('prompt') !== null && "
            "document.getElementById('prompt').textContent.includes('onerror')"
        )
        prompt = page.inner_text("#prompt")  # the model's message, quoted by the game, as text
        assert "<script>window.__xss=2</script>" in prompt and "<svg onload=" in prompt
        assert page.inner_text("#dialogue li.you .text") == "[message] " + XSS
        assert page.evaluate("window.__xss") is None
        assert page.locator("#board img, #board a, #board svg, #board script").count() == 0
        shot(page, artifacts, "serve-text-dond.png")
        page.fill("#answer", "[propose] 9 books")
        page.click("#send")
        page.wait_for_function("() => document.getElementById('error').textContent !== ''")
        assert "[message]" not in page.inner_text("#error")
        assert page.evaluate("window.__xss") is None
    finally:
        context.close()
