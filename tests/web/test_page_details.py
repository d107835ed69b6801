"""Smaller promises of the play page: the model's words are cleaned like the person's, a malformed
session cookie and a server error both answer with the security headers, the header never shows
the model's internal address, and the end screen shows the model's score too."""

from __future__ import annotations

import pytest

from stratagem.agents.llm import LLMAgent
from stratagem.backends.scripted import ScriptedBackend
from stratagem.web.security import COOKIE, SECURITY_HEADERS, public_name

from .conftest import ORIGIN
from .test_api import BARGAINING, dond_model, dond_server, finish_dond

# a right-to-left override shows "evil" as "live"; a bell and an escape sequence show as boxes
TRICKY = "I want the \u202eevil\u202c books\u0007 now\u001b[31m"
CLEANED = "I want the evil books now [31m"


def test_the_models_dond_words_are_cleaned_like_the_persons(serve, dond_contexts):
    def model(chat):
        text = dond_model(chat)
        return text if text.startswith("[propose]") else "[message] " + TRICKY

    server = dond_server(serve, dond_contexts, script=model)
    gid = server.new_game()["game_id"]
    server.turn(gid, {"kind": "message", "text": TRICKY})
    state = server.settle(gid)
    texts = {d["who"]: d["text"] for d in state["board"]["dialogue"]}
    assert texts == {"you": CLEANED, "model": CLEANED}
    # the trace keeps what the model really wrote
    assert any(TRICKY in (d.text or "") for d in server.human(gid).episode.decisions)


def test_the_models_bargaining_words_are_cleaned(serve):
    script = (
        "Thought: fine\nCode:\n```py\n"
        f'send_message(content="{TRICKY.replace(chr(7), "").replace(chr(27), "")}\\u0007")\n'
        'make_offer(price=7500, side_offer="free\\u001b[1m delivery")\n```'
    )
    server = serve("bargaining", agent=lambda g: _named(g, script), params=BARGAINING, seat=0)
    gid = server.new_game()["game_id"]
    assert server.turn(gid, {"kind": "offer", "price": 7990}).status_code == 200
    log = server.settle(gid)["board"]["log"]
    said = [e for e in log if e["who"] == "model" and e["kind"] == "message"]
    offer = [e for e in log if e["who"] == "model" and e["kind"] == "offer"]
    assert [e["text"] for e in said] == ["I want the evil books now[31m"]
    assert [e["side_offer"] for e in offer] == ["free [1m delivery"]


def _named(game, script, model_id="scripted"):
    return LLMAgent(ScriptedBackend(lambda chat: script, model_id=model_id), game)


def test_a_non_ascii_session_cookie_is_400_with_the_security_headers(serve):
    server = serve()
    for path in ("/api/session", "/api/games/" + "A" * 43):
        r = server.client.get(path, headers=[(b"cookie", COOKIE.encode() + b"=ab\xc3\xa9.cd")])
        assert r.status_code == 400, r.text
        assert r.json() == {
            "detail": "the session cookie is malformed; it was cleared: reload the page"
        }
        for name, value in SECURITY_HEADERS:
            assert r.headers[name] == value
        assert f'{COOKIE}="";' in r.headers["set-cookie"] and "Max-Age=0" in r.headers["set-cookie"]
    r = server.client.post(
        "/api/games",
        headers=[(b"cookie", COOKIE.encode() + b"=\xff"), (b"origin", ORIGIN.encode())],
    )
    assert r.status_code == 400
    # without it the page works again
    server.client.cookies.clear()
    assert server.client.get("/api/session").status_code == 200


def test_a_server_error_carries_the_security_headers(serve, monkeypatch):
    server = serve()
    gid = server.new_game()["game_id"]

    def broken(*args, **kwargs):
        raise RuntimeError("secret-internal-detail")

    monkeypatch.setattr(server.service.board, "public", broken)
    r = server.client.get(f"/api/games/{gid}")
    assert r.status_code == 500 and r.json() == {"detail": "internal error"}
    assert "secret-internal-detail" not in r.text
    for name, value in SECURITY_HEADERS:
        assert r.headers[name] == value
    assert r.headers["cache-control"] == "no-store"


def test_the_header_never_shows_the_models_internal_address(serve):
    server = serve(
        "ipd",
        agent=lambda g: _named(g, "COOPERATE", "my-model@http://10.1.2.3:8001/v1"),
        spec="openai:my-model",
    )
    assert server.service.agent.name == "llm:my-model@http://10.1.2.3:8001/v1"
    r = server.client.get("/api/session")
    assert r.json()["agent"] == "llm:my-model"
    state = server.new_game()
    assert "10.1.2.3" not in r.text + str(state)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("llm:gpt-4o-mini@https://api.internal.example/v1", "llm:gpt-4o-mini"),
        ("llm:SmolLM2-135M-Instruct", "llm:SmolLM2-135M-Instruct"),
        (
            "llm:Qwen/Qwen2.5-1.5B-Instruct+/srv/runs/sft/adapter",
            "llm:Qwen/Qwen2.5-1.5B-Instruct+adapter",
        ),
        ("llm:/home/ann/models/tuned/", "llm:tuned"),
        ("FairSplit", "FairSplit"),
    ],
)
def test_public_names(name, shown):
    assert public_name(name) == shown


def test_the_end_screen_shows_the_models_score_too(serve, dond_contexts):
    state = finish_dond(dond_server(serve, dond_contexts))
    outcome = state["outcome"]
    assert (outcome["your_score"], outcome["model_score"]) == (6.0, 8.0)
    script = "Thought: ok\nCode:\n```py\nmake_offer(price=7500)\n```"
    server = serve("bargaining", agent=lambda g: _named(g, script), params=BARGAINING, seat=0)
    gid = server.new_game()["game_id"]
    server.turn(gid, {"kind": "offer", "price": 7990})
    server.settle(gid)
    server.turn(gid, {"kind": "accept"})
    state = server.settle(gid)
    setup = server.human(gid).episode.state.setup
    assert state["outcome"]["your_utility"] == pytest.approx(7500 - setup.seller_value)
    assert state["outcome"]["model_utility"] == pytest.approx(setup.buyer_value - 7500)
