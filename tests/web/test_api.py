"""API tests of the play page, one group per RELIABILITY I-promise (TestClient, no browser)."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import stat
import threading
import time
from pathlib import Path

import pytest

import stratagem.web as web_package
from stratagem.agent import Decision
from stratagem.errors import ConfigError
from stratagem.games.bargaining.catalog import Item
from stratagem.web import app as web_app
from stratagem.web import boards, episodes, security, storage
from stratagem.web.app import Limits, create_app
from stratagem.web.security import COOKIE, RateLimiter, same_origin, session_key, sign, unsign

from .conftest import ITEM, ORIGIN, last_user, other_client, scripted

SRC = Path(__file__).resolve().parents[2] / "src" / "stratagem"
STATIC = SRC / "web" / "static"
SENTINEL = "HIDDEN-REASONING-7f3a"


def dond_model(chat: list[dict]) -> str:
    """Talks (with hidden reasoning) until it must propose, then keeps 2 books and 1 ball."""
    if "submit" in last_user(chat) and "proposal" in last_user(chat):
        return "[propose] (2 books, 0 hats, 1 balls)"
    return f"[message] <think>{SENTINEL} my values are 3 0 2</think>Books matter most to me."


def dond_server(serve, dond_contexts, script=dond_model, **kw):
    """A Deal or No Deal server on the fixed context, the person in seat 0, a scripted model."""
    return serve(
        "dond",
        agent=lambda g: scripted(g, script),
        params={"contexts": dond_contexts},
        seat=0,
        spec="hf:scripted",
        **kw,
    )


def finish_dond(server, client=None) -> dict:
    """Plays one Deal or No Deal game to its end against ``dond_model`` (person in seat 0):
    a message, then the proposal that complements the model's."""
    state = server.new_game(client)
    gid = state["game_id"]
    r = server.turn(gid, {"kind": "message", "text": "hello"}, client)
    assert r.status_code == 200, r.text
    server.settle(gid, client)
    r = server.turn(gid, {"kind": "propose", "books": 0, "hats": 2, "balls": 1}, client)
    assert r.status_code == 200, r.text
    return server.settle(gid, client)


def _item_dict(item: Item) -> dict:
    return {
        "title": item.title,
        "category": item.category,
        "description": item.description,
        "low": item.low,
        "high": item.high,
    }


BARGAINING = {"catalog": [_item_dict(ITEM)], "split": None}


# ---- a full game of each kind ----


def test_dond_game_to_the_end_scores_and_is_stored(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    state = finish_dond(server)
    assert state["over"] and state["outcome"]["agreement"]
    assert state["outcome"]["your_points"] == 6 and state["outcome"]["your_score"] == 6.0
    assert state["outcome"]["model_proposal"] == [2, 0, 1]
    [row] = server.service.store.records()
    assert row.status == "finished" and row.human_score == 6.0 and row.model_score == 8.0
    assert row.agent_spec == "hf:scripted" and row.agent_name == "llm:scripted"
    assert row.human_view["system"] and "a book is worth 1" in row.human_view["system"]
    assert "a book is worth 3" in row.model_view["system"]
    assert row.model_view["chat"][0]["role"] == "user"
    assert row.trace.status == "complete" and row.trace.meta["seat"] == 1
    assert row.trace.agents == ("human", "llm:scripted")
    assert row.started <= row.ended


def test_bargaining_deal_through_the_api(serve):
    script = (
        'Thought: a fair price\nCode:\n```py\nsend_message(content="Too high.")\n'
        "make_offer(price=7500)\n```"
    )
    server = serve("bargaining", agent=lambda g: scripted(g, [script]), params=BARGAINING, seat=0)
    state = server.new_game()
    assert state["your_turn"] and state["board"]["listing"] and state["board"]["role"] == "seller"
    gid = state["game_id"]
    assert (
        server.turn(gid, {"kind": "offer", "price": 7990, "message": "Mint condition"}).status_code
        == 200
    )
    state = server.settle(gid)
    assert state["board"]["their_offer"] == 7500.0
    assert [e["kind"] for e in state["board"]["log"]] == ["message", "listing", "message", "offer"]
    r = server.turn(gid, {"kind": "accept"})
    assert r.status_code == 200, r.text
    state = server.settle(gid)
    seller_value = server.human(gid).episode.state.setup.seller_value
    assert state["outcome"]["deal"] and state["outcome"]["price"] == 7500.0
    assert state["outcome"]["your_utility"] == pytest.approx(7500.0 - seller_value)
    assert server.service.store.count() == 1


def test_bargaining_as_the_buyer(serve):
    server = serve("bargaining", spec="strategy:Boulware", params=BARGAINING, seat=1)
    state = server.new_game()
    gid = state["game_id"]
    board = state["board"]
    assert state["your_turn"] and board["role"] == "buyer" and not board["listing"]
    assert [(e["who"], e["kind"]) for e in board["log"]] == [("model", "listing")]
    assert board["their_offer"] == board["log"][0]["price"]
    r = server.turn(gid, {"kind": "reject", "message": "Too much for me."})
    assert r.status_code == 200, r.text
    state = server.settle(gid)
    assert server.turn(gid, {"kind": "offer", "price": 7001.004}).status_code == 200
    assert server.human(gid).episode.state.offers[1] == [7001.0]  # cents
    state = server.settle(gid)
    assert server.turn(gid, {"kind": "quit", "message": "Goodbye."}).status_code == 200
    state = server.settle(gid)
    assert state["over"] and state["outcome"]["end_reason"] == "quit"
    assert state["outcome"]["deal"] is False and state["outcome"]["your_utility"] == 0.0


def test_ipd_eight_rounds_against_tit_for_tat(serve):
    server = serve("ipd", spec="strategy:TitForTat")
    state = server.new_game()
    gid = state["game_id"]
    for _ in range(8):
        assert state["legal"] == ["COOPERATE", "DEFECT"]
        assert server.turn(gid, {"action": "COOPERATE"}).status_code == 200
        state = server.settle(gid)
        while not state["over"] and not state["your_turn"]:
            state = server.settle(gid)
    assert state["over"] and state["outcome"] == {"your_total": 24.0, "model_total": 24.0}
    assert len(state["board"]["rounds"]) == 8


def test_kuhn_six_hands(serve):
    server = serve("kuhn", spec="strategy:NashApprox")
    state = server.new_game()
    gid = state["game_id"]
    for _ in range(40):
        if state["over"]:
            break
        assert state["your_turn"], state
        assert state["board"]["card"] in ("J", "Q", "K")
        assert server.turn(gid, {"action": state["legal"][0]}).status_code == 200
        state = server.settle(gid)
    assert state["over"] and len(state["board"]["past"]) == 6
    total = state["outcome"]["your_total"]
    assert total == sum(h["your_chips"] for h in state["board"]["past"])
    assert state["outcome"]["model_total"] == -total


# ---- I1: sessions are isolated ----


def test_i1_game_ids_are_unguessable_and_distinct(serve):
    server = serve()
    ids = {server.new_game()["game_id"] for _ in range(3)}
    assert len(ids) == 3 and all(re.fullmatch(r"[A-Za-z0-9_-]{43}", i) for i in ids)


def test_i1_another_sessions_game_is_403_and_an_unknown_one_404(serve):
    server = serve()
    gid = server.new_game()["game_id"]
    intruder = other_client(server)
    assert intruder.get(f"/api/games/{gid}").status_code == 403
    for action in ("turn", "retry", "leave"):
        r = intruder.post(
            f"/api/games/{gid}/{action}",
            json={"kind": "message", "text": "x"},
            headers={"Origin": ORIGIN},
        )
        assert r.status_code == 403, action
    assert server.client.get("/api/games/" + "A" * 43).status_code == 404


def test_i1_a_tampered_cookie_gets_a_new_session_never_anothers(serve):
    server = serve()
    gid = server.new_game()["game_id"]
    good = server.client.cookies[COOKIE]
    sid, mac = good.split(".")
    intruder = other_client(server)
    for forged in (sid + "." + mac[:-2] + "AA", sid, sid + ".", "x" * 300, good + "x"):
        intruder.cookies.set(COOKIE, forged)
        assert intruder.get(f"/api/games/{gid}").status_code == 403
        assert intruder.get("/api/session").json()["live"] is None
    intruder.cookies.set(COOKIE, sid + ".bad")
    r = intruder.post("/api/games", headers={"Origin": ORIGIN})
    assert r.status_code == 201 and r.json()["game_id"] != gid
    assert r.cookies[COOKIE].split(".")[0] != sid
    assert server.client.get("/api/session").json()["live"] == gid


def test_i1_two_sessions_see_only_their_own_games(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    other = other_client(server)
    a = server.new_game()
    b = server.new_game(other)
    server.turn(a["game_id"], {"kind": "message", "text": "alpha from A"})
    server.turn(b["game_id"], {"kind": "message", "text": "bravo from B"}, other)
    sa, sb = server.settle(a["game_id"]), server.settle(b["game_id"], other)
    assert "bravo" not in json.dumps(sa) and "alpha" not in json.dumps(sb)
    assert server.client.get("/api/session").json()["live"] == a["game_id"]
    assert other.get("/api/session").json()["live"] == b["game_id"]


def test_i1_no_mutable_module_level_state_in_the_web_package():
    modules = [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(web_package.__path__, "stratagem.web.")
    ]
    assert {web_app, boards, episodes, security, storage} <= set(modules)
    for module in (web_package, *modules):
        for name, value in vars(module).items():
            if name.startswith("__") or isinstance(value, type):
                continue
            assert not isinstance(value, dict | list | set | bytearray), f"{module.__name__}.{name}"


def test_i1_two_services_share_nothing(serve):
    a, b = serve(db="a.db"), serve(db="b.db")
    gid = a.new_game()["game_id"]
    assert b.client.get(f"/api/games/{gid}").status_code == 404
    assert gid not in b.service.games


# ---- I2: no hard-coded secret ----


def test_i2_fresh_starts_make_different_keys_stored_0600(tmp_path, monkeypatch):
    monkeypatch.delenv(security.KEY_ENV, raising=False)
    one, two = session_key(tmp_path / "a.key"), session_key(tmp_path / "b.key")
    assert one != two and len(one) >= 64
    assert stat.S_IMODE((tmp_path / "a.key").stat().st_mode) == 0o600
    assert session_key(tmp_path / "a.key") == one  # a restart keeps the key


def test_i2_key_from_the_environment_and_refusals(tmp_path, monkeypatch):
    monkeypatch.setenv(security.KEY_ENV, "k" * 40)
    assert session_key(tmp_path / "unused.key") == b"k" * 40
    assert not (tmp_path / "unused.key").exists()
    monkeypatch.setenv(security.KEY_ENV, "short")
    with pytest.raises(ConfigError, match="at least 32"):
        session_key(tmp_path / "x.key")
    monkeypatch.delenv(security.KEY_ENV)
    path = tmp_path / "open.key"
    path.write_text("y" * 64)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        session_key(path)


def test_i2_no_secret_literal_in_the_source():
    pattern = re.compile(r"""(secret_key|SECRET_KEY|session_key)\s*=\s*['"]""")
    for path in SRC.rglob("*.py"):
        assert not pattern.search(path.read_text()), path


def test_i2_signatures():
    key = b"a" * 32
    value = sign(key, "abc")
    assert unsign(key, value) == "abc"
    assert unsign(b"b" * 32, value) is None
    assert unsign(key, None) is None and unsign(key, "abc") is None


# ---- I3: the model's private values never reach the browser ----


def test_i3_bargaining_model_value_and_thought_never_in_a_response(serve):
    thought = "SECRET-THOUGHT-91c2"

    def buyer(chat):
        return (
            f"Thought: {thought}; my limit is high\nCode:\n```py\n"
            'send_message(content="Let us talk.")\nmake_offer(price=7100)\n```'
        )

    server = serve("bargaining", agent=lambda g: scripted(g, buyer), params=BARGAINING, seat=0)
    bodies: list[str] = []
    r = server.client.post("/api/games", headers={"Origin": ORIGIN})
    bodies.append(r.text + str(r.headers))
    gid = r.json()["game_id"]
    for body in (
        {"kind": "offer", "price": 7900},
        {"kind": "message", "text": "No."},
        {"kind": "offer", "price": 7800},
        {"kind": "quit"},
    ):
        server.settle(gid)
        r = server.turn(gid, body)
        assert r.status_code == 200, r.text
        bodies.append(r.text + str(r.headers))
        bodies.append(json.dumps(server.settle(gid)))
    assert server.settle(gid)["over"]
    setup = server.human(gid).episode.state.setup
    everything = "\n".join(bodies)
    for leak in (f"{setup.buyer_value:.2f}", repr(setup.buyer_value), thought, "BUYER"):
        assert leak not in everything, leak
    assert repr(setup.seller_value) in everything  # the person's own value is shown


def test_i3_dond_model_values_and_reasoning_never_in_a_response(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    state = finish_dond(server)
    texts = [json.dumps(state), server.client.get(f"/api/games/{state['game_id']}").text]
    everything = "\n".join(texts)
    assert SENTINEL not in everything and "my values are" not in everything
    assert "a book is worth 3" not in everything
    assert [i["value"] for i in state["board"]["items"]] == [1, 2, 2]
    assert "Books matter most to me." in everything  # the visible part of the message


# ---- I4: inputs are validated; refused input changes nothing ----

BAD_DOND = [
    {"kind": "propose", "books": -1, "hats": 1, "balls": 1},
    {"kind": "propose", "books": 1.5, "hats": 1, "balls": 1},
    {"kind": "propose", "books": 1.0, "hats": 1, "balls": 1},
    {"kind": "propose", "books": "1", "hats": 1, "balls": 1},
    {"kind": "propose", "books": True, "hats": 1, "balls": 1},
    {"kind": "propose", "books": None, "hats": 1, "balls": 1},
    {"kind": "propose", "books": 10**100, "hats": 1, "balls": 1},
    {"kind": "propose", "books": 1, "hats": 1},
    {"kind": "propose", "books": 1},
    {"kind": "propose", "books": 1, "hats": 1, "balls": 1, "extra": 0},
    {"kind": "propose", "text": "I want 2 books, 1 hat and 0 balls"},
    {"kind": "propose", "books": 3, "hats": 0, "balls": 0},
    {"kind": "message", "text": "x" * 1001},
    {"kind": "message", "text": "x" * 1_000_000},
    {"kind": "message", "text": "   \n\t "},
    {"kind": "message", "text": "\u0000\u202e"},
    {"kind": "message", "text": 42},
    {"kind": "message"},
    {"kind": "shout", "text": "hi"},
    {"text": "hi"},
    [1, 2, 3],
    "[propose] (1 books, 1 hats, 1 balls)",
    None,
]


def _dond_ready(serve, dond_contexts):
    server = dond_server(serve, dond_contexts, limits=Limits(turns_per_minute=1000))
    state = server.new_game()
    return server, state


@pytest.mark.parametrize("body", BAD_DOND, ids=[f"case{i}" for i in range(len(BAD_DOND))])
def test_i4_bad_dond_turns_are_422_and_change_nothing(serve, dond_contexts, body):
    server, state = _dond_ready(serve, dond_contexts)
    gid = state["game_id"]
    if isinstance(body, dict) and body.get("books") == 3:
        server.turn(gid, {"kind": "message", "text": "hi"})  # a proposal is allowed now
        state = server.settle(gid)
    before = (json.dumps(state, sort_keys=True), len(server.human(gid).episode.decisions))
    r = server.turn(gid, body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and len(detail) < 200 and "\n" not in detail
    after = (
        json.dumps(server.settle(gid), sort_keys=True),
        len(server.human(gid).episode.decisions),
    )
    assert after == before


def test_i4_rule_refusals_are_422_without_spending_a_correction(serve, dond_contexts):
    server, state = _dond_ready(serve, dond_contexts)
    gid = state["game_id"]
    if not state["board"]["dialogue"]:  # the person speaks first: a proposal is too early
        r = server.turn(gid, {"kind": "propose", "books": 1, "hats": 1, "balls": 1})
        assert r.status_code == 422 and "message" in r.json()["detail"]
    server.turn(gid, {"kind": "message", "text": "hi"})
    server.settle(gid)
    assert server.human(gid).episode.state.policy.total == [0, 0]


def test_i4_bodies_that_are_not_json(serve, dond_contexts):
    server, state = _dond_ready(serve, dond_contexts)
    url = f"/api/games/{state['game_id']}/turn"
    h = {"Origin": ORIGIN}
    c = server.client
    assert (
        c.post(
            url, content=b"{not json", headers={**h, "Content-Type": "application/json"}
        ).status_code
        == 422
    )
    assert (
        c.post(
            url,
            content=b"kind=message",
            headers={**h, "Content-Type": "application/x-www-form-urlencoded"},
        ).status_code
        == 422
    )
    assert (
        c.post(
            url, content=b"[" * 100_000, headers={**h, "Content-Type": "application/json"}
        ).status_code
        == 422
    )
    assert (
        c.post(
            url, content=b"x" * 2_000_000, headers={**h, "Content-Type": "application/json"}
        ).status_code
        == 422
    )
    assert (
        c.post(
            url, content=b"1" * 5000, headers={**h, "Content-Type": "application/json"}
        ).status_code
        == 422
    )


def test_i4_text_is_normalised_and_stripped(serve, dond_contexts):
    server, state = _dond_ready(serve, dond_contexts)
    gid = state["game_id"]
    h = {"Origin": ORIGIN, "Content-Type": "application/json"}
    url = f"/api/games/{gid}/turn"
    # a lone surrogate (sent as an ASCII escape) is not text: refused, nothing changes
    body = json.dumps({"kind": "message", "text": "hi \ud800"})
    assert server.client.post(url, content=body, headers=h).status_code == 422
    assert server.settle(gid)["version"] == state["version"]
    body = json.dumps({"kind": "message", "text": "\uff48\uff49\u0000\u202e there\n\tfriend"})
    assert server.client.post(url, content=body, headers=h).status_code == 200
    mine = [d for d in server.settle(gid)["board"]["dialogue"] if d["who"] == "you"]
    assert mine[0]["text"] == "hi there friend"


def test_i4_message_after_the_game_ended_is_422(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    state = finish_dond(server)
    r = server.turn(state["game_id"], {"kind": "message", "text": "one more thing"})
    assert r.status_code == 422 and "over" in r.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "offer", "price": -5},
        {"kind": "offer", "price": 0},
        {"kind": "offer", "price": 0.001},
        {"kind": "offer", "price": "7000"},
        {"kind": "offer", "price": True},
        {"kind": "offer", "price": 1e308 * 10},
        {"kind": "offer", "price": float("nan")},
        {"kind": "offer", "price": 1e9},
        {"kind": "offer"},
        {"kind": "offer", "price": 7000, "side": "x"},
        {"kind": "accept"},
        {"kind": "message", "text": "hello"},
        {"kind": "quit"},
    ],
)
def test_i4_bad_bargaining_turns_are_422(serve, body):
    server = serve("bargaining", spec="strategy:Boulware", seat=0, params=BARGAINING)
    state = server.new_game()
    gid = state["game_id"]
    payload = json.dumps(body, allow_nan=True)  # NaN and inf as Python's json writes them
    r = server.client.post(
        f"/api/games/{gid}/turn",
        content=payload,
        headers={"Origin": ORIGIN, "Content-Type": "application/json"},
    )
    assert r.status_code == 422, (body, r.text)
    assert server.settle(gid)["version"] == state["version"]


@pytest.mark.parametrize("action", ["SURRENDER", "cooperate", "COOPERATE\nDEFECT", ""])
def test_i4_only_legal_tokens_in_choice_games(serve, action):
    server = serve("ipd", spec="strategy:TitForTat")
    state = server.new_game()
    r = server.turn(state["game_id"], {"action": action})
    assert r.status_code == 422
    assert server.settle(state["game_id"])["board"]["rounds"] == []


def test_i4_new_game_body(serve):
    server = serve()
    for body in ({"seat": 2}, {"seat": "0"}, {"seat": True}, {"side": 0}, [0]):
        r = server.client.post("/api/games", json=body, headers={"Origin": ORIGIN})
        assert r.status_code == 422, body
    assert (
        server.client.post("/api/games", json={"seat": 1}, headers={"Origin": ORIGIN}).json()[
            "seat"
        ]
        == 1
    )


# ---- I5: no XSS (the browser test renders it; here the headers and the scripts) ----


def test_i5_strict_csp_on_every_response(serve):
    server = serve()
    for path in ("/", "/static/main.js", "/api/session", "/nope"):
        csp = server.client.get(path).headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    r = server.client.get("/")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"


def test_i5_scripts_never_write_html():
    for path in STATIC.glob("*.js"):
        text = path.read_text()
        for sink in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "javascript:",
        ):
            assert sink not in text, (path.name, sink)
    html = (STATIC / "index.html").read_text()
    assert re.search(r"<script(?![^>]*\bsrc=)", html) is None  # no inline script
    assert re.search(r"\son[a-z]+=", html) is None  # no inline handler


# ---- I6: cross-site requests are blocked ----


def test_i6_state_changing_requests_need_the_pages_origin(serve):
    server = serve()
    gid = server.new_game()["game_id"]
    c = server.client
    for headers in (
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {},
        {"Referer": "http://evil.example/page"},
        {"Origin": "http://testserver.evil.example"},
    ):
        assert c.post("/api/games", headers=headers).status_code == 403, headers
        r = c.post(f"/api/games/{gid}/turn", json={"kind": "message", "text": "x"}, headers=headers)
        assert r.status_code == 403, headers
        assert c.post(f"/api/games/{gid}/leave", headers=headers).status_code == 403
    assert c.post(
        f"/api/games/{gid}/turn",
        json={"kind": "message", "text": "hi"},
        headers={"Referer": "http://testserver/"},
    ).status_code in (200, 409)
    assert (
        "access-control-allow-origin"
        not in c.get("/api/session", headers={"Origin": "http://evil.example"}).headers
    )


def test_i6_cookie_flags(serve):
    server = serve()
    r = server.client.post("/api/games", headers={"Origin": ORIGIN})
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain http on loopback
    from fastapi.testclient import TestClient

    https = TestClient(server.client.app, base_url="https://testserver")
    r = https.post("/api/games", headers={"Origin": "https://testserver"})
    assert r.status_code == 201 and "Secure" in r.headers["set-cookie"]


def test_i6_no_websocket_endpoint(serve):
    server = serve()
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises((WebSocketDisconnect, Exception)):
        with server.client.websocket_connect("/api/ws", headers={"Origin": "http://evil.example"}):
            pass


def test_i6_same_origin_rules():
    own = "http://127.0.0.1:8000"
    assert same_origin(own, None, own)
    assert not same_origin("http://127.0.0.1:8001", None, own)
    assert same_origin(None, own + "/", own) and not same_origin(None, own + ".evil/", own)
    assert not same_origin(None, None, own)


# ---- I7: rate limits and one model call per game ----


def test_i7_rapid_turns_get_429_after_the_limit(serve, dond_contexts):
    server = dond_server(serve, dond_contexts, limits=Limits(turns_per_minute=10))
    gid = server.new_game()["game_id"]
    codes = [server.turn(gid, {"kind": "message", "text": f"m{i}"}).status_code for i in range(50)]
    assert 429 not in codes[:10] and set(codes[10:]) == {429}
    r = server.turn(gid, {"kind": "message", "text": "again"})
    assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60


def test_i7_per_ip_limit_covers_every_session(serve):
    server = serve(limits=Limits(turns_per_minute=100, turns_per_minute_ip=6))
    clients = [server.client, other_client(server), other_client(server)]
    games = [server.new_game(c)["game_id"] for c in clients]
    codes = [
        server.turn(g, {"kind": "message", "text": "hi"}, c).status_code
        for _ in range(3)
        for g, c in zip(games, clients, strict=True)
    ]
    assert codes.count(429) == 3 and 429 not in codes[:6]


def test_i7_new_games_are_limited(serve):
    server = serve(limits=Limits(games_per_hour=3, games_per_hour_ip=100))
    codes = [
        server.client.post("/api/games", headers={"Origin": ORIGIN}).status_code for _ in range(5)
    ]
    assert codes == [201, 201, 201, 429, 429]
    server = serve(limits=Limits(games_per_hour=100, games_per_hour_ip=2), db="b.db")
    codes = [
        other_client(server).post("/api/games", headers={"Origin": ORIGIN}).status_code
        for _ in range(3)
    ]
    assert codes == [201, 201, 429]
    server = serve(limits=Limits(games_per_session=2), db="c.db")
    codes = [
        server.client.post("/api/games", headers={"Origin": ORIGIN}).status_code for _ in range(3)
    ]
    assert codes == [201, 201, 429]


def test_i7_two_parallel_submits_make_one_model_call(serve, dond_contexts):
    free = threading.Event()
    free.set()

    def held(chat):  # the model answers only once the test lets it
        assert free.wait(10)
        return dond_model(chat)

    server = dond_server(serve, dond_contexts, script=held)
    agent = server.service.agent
    state = server.new_game()
    gid = state["game_id"]
    calls = len(agent.backend.calls)
    free.clear()
    barrier = threading.Barrier(2)
    codes = []

    def submit(text):
        barrier.wait()
        codes.append(server.turn(gid, {"kind": "message", "text": text}).status_code)

    threads = [threading.Thread(target=submit, args=(t,)) for t in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    free.set()
    state = server.settle(gid)
    assert sorted(codes) == [200, 409]
    assert len(agent.backend.calls) == calls + 1
    assert len([d for d in state["board"]["dialogue"] if d["who"] == "you"]) == 1


def test_i7_model_calls_are_batched_across_games(serve):
    seen: list[int] = []
    release = threading.Event()

    class Held:
        name = "held"

        def __init__(self, inner):
            self.inner = inner

        def act(self, batch):
            seen.append(len(batch))
            assert release.wait(10)  # the first call lasts until every game is waiting
            return self.inner.act(batch)

    from stratagem.agents.spec import make_agent

    server = serve("ipd", agent=lambda g: Held(make_agent("strategy:TitForTat", g)))
    clients = [server.client] + [other_client(server) for _ in range(3)]
    for c in clients:
        assert c.post("/api/games", headers={"Origin": ORIGIN}).status_code == 201
    release.set()
    deadline = time.monotonic() + 10
    while sum(seen) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    # the first call serves what was queued when it started (usually the first game alone); the
    # next one every game that queued meanwhile: never one call per game
    assert sum(seen) == 4 and len(seen) <= 2 and max(seen) >= 2, seen


def test_i7_rate_limiter_window():
    now = [0.0]
    limiter = RateLimiter(lambda: now[0])
    assert [limiter.hit("k", 2, 10) for _ in range(3)] == [None, None, 10]
    now[0] = 10.5
    assert limiter.hit("k", 2, 10) is None
    limiter.prune(5)
    now[0] = 100
    limiter.prune(5)
    assert limiter._hits == {}


# ---- I8: finished games are never lost or doubled ----


def test_i8_finishing_twice_stores_one_row(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    state = finish_dond(server)
    human = server.human(state["game_id"])
    assert server.service.close(human, "finished") is False
    assert server.service.close(human, "abandoned") is False
    record = server.service.store.records()[0]
    assert server.service.store.save(record) is False
    assert server.service.store.count() == 1


def test_i8_sql_in_a_message_is_stored_verbatim(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    state = server.new_game()
    gid = state["game_id"]
    attack = "'); DROP TABLE games;--"
    assert server.turn(gid, {"kind": "message", "text": attack}).status_code == 200
    server.settle(gid)
    server.turn(gid, {"kind": "propose", "books": 0, "hats": 2, "balls": 1})
    server.settle(gid)
    [row] = server.service.store.records()
    assert any(m["content"].count(attack) for m in row.model_view["chat"])
    assert attack in row.trace.to_json()


def test_i8_an_idle_game_is_stored_once_as_abandoned(serve, dond_contexts):
    now = [1000.0]
    server = dond_server(serve, dond_contexts, limits=Limits(idle_seconds=60), clock=lambda: now[0])
    gid = server.new_game()["game_id"]
    server.turn(gid, {"kind": "message", "text": "brb"})
    server.settle(gid)
    assert server.service.reap() == 0
    now[0] += 61
    assert server.service.reap() == 1 and server.service.reap() == 0
    [row] = server.service.store.records()
    assert row.status == "abandoned" and row.human_score is None
    assert row.trace.status == "error" and row.trace.error == "abandoned"
    assert server.client.get(f"/api/games/{gid}").status_code == 404  # forgotten after storing
    assert server.client.get("/api/session").json()["live"] is None


def test_i8_a_failed_write_is_retried_and_keeps_the_finished_status(
    serve, dond_contexts, monkeypatch
):
    now = [0.0]
    server = dond_server(serve, dond_contexts, limits=Limits(idle_seconds=60), clock=lambda: now[0])
    store = server.service.store
    real = store.save
    failures = iter([True])

    def flaky_save(record):
        if next(failures, False):
            raise OSError("disk full")
        return real(record)

    monkeypatch.setattr(store, "save", flaky_save)
    state = finish_dond(server)
    assert state["over"] and store.count() == 0  # the write failed; the game is kept in memory
    now[0] += 61
    assert server.service.reap() == 0
    [row] = store.records()
    assert row.status == "finished" and row.human_score == 6.0


def test_i8_leaving_or_starting_again_abandons_the_live_game(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    first = server.new_game()["game_id"]
    second = server.new_game()["game_id"]  # a new game while one is live
    r = server.client.post(f"/api/games/{second}/leave", headers={"Origin": ORIGIN})
    assert r.status_code == 200 and r.json()["abandoned"] and r.json()["over"]
    server.client.post(f"/api/games/{second}/leave", headers={"Origin": ORIGIN})
    rows = server.service.store.records()
    assert [(r.game_id, r.status) for r in rows] == [(first, "abandoned"), (second, "abandoned")]
    assert server.turn(second, {"kind": "message", "text": "hi"}).status_code == 422


def test_i8_shutdown_stores_live_games_as_abandoned(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    server.new_game()
    server.service.shutdown()
    assert [r.status for r in server.service.store.records()] == ["abandoned"]


# ---- I9: safe deployment defaults ----


def test_i9_a_server_error_is_a_generic_500(serve, monkeypatch):
    server = serve()
    gid = server.new_game()["game_id"]

    def broken(*args, **kwargs):
        raise RuntimeError("secret-internal-detail")

    monkeypatch.setattr(server.service.board, "public", broken)
    r = server.client.get(f"/api/games/{gid}")
    assert r.status_code == 500 and r.json() == {"detail": "internal error"}
    assert "Traceback" not in r.text and "secret-internal-detail" not in r.text
    assert server.client.app.debug is False


def test_i9_trusted_hosts(serve):
    from fastapi.testclient import TestClient

    from stratagem.web.security import trusted_hosts

    server = serve()
    app = create_app(server.service, allowed_hosts=["play.example"])
    assert TestClient(app, base_url="http://play.example").get("/api/session").status_code == 200
    assert TestClient(app, base_url="http://evil.example").get("/api/session").status_code == 400
    assert "127.0.0.1" in trusted_hosts("127.0.0.1", []) and "localhost" in trusted_hosts("::1", [])
    assert trusted_hosts("10.0.0.5", ["play.example"]) == ["10.0.0.5", "play.example"]
    assert trusted_hosts("0.0.0.0", ["play.example"]) == ["play.example"]
    with pytest.raises(ConfigError, match="--allowed-host"):
        trusted_hosts("0.0.0.0", [])


def test_i9_no_docs_or_schema_endpoints(serve):
    server = serve()
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert server.client.get(path).status_code == 404


# ---- I10: a backend failure does not strand the player ----


def test_i10_backend_failure_then_retry_continues_the_game(serve, dond_contexts):
    down = threading.Event()

    def flaky(chat):
        if down.is_set():
            raise RuntimeError("HTTP 500 from the model server")
        return dond_model(chat)

    server = dond_server(serve, dond_contexts, script=flaky)
    state = server.new_game()
    gid = state["game_id"]
    down.set()
    server.turn(gid, {"kind": "message", "text": "are you there?"})
    state = server.settle(gid)
    assert state["model_unavailable"] and not state["your_turn"] and not state["over"]
    assert server.turn(gid, {"kind": "message", "text": "hello?"}).status_code == 409
    r = server.client.post(f"/api/games/{gid}/retry", headers={"Origin": ORIGIN})
    state = server.settle(gid)
    assert state["model_unavailable"]  # still down
    down.clear()
    r = server.client.post(f"/api/games/{gid}/retry", headers={"Origin": ORIGIN})
    assert r.status_code == 200
    state = server.settle(gid)
    assert not state["model_unavailable"] and state["your_turn"]
    assert (
        server.client.post(f"/api/games/{gid}/retry", headers={"Origin": ORIGIN}).status_code == 409
    )
    assert server.human(gid).episode.error is None
    server.turn(gid, {"kind": "propose", "books": 0, "hats": 2, "balls": 1})
    assert server.settle(gid)["outcome"]["agreement"]


def test_i10_a_decision_carrying_an_error_is_a_failure_not_the_end(serve):
    class Down:
        name = "down"

        def act(self, batch):
            return [Decision(None, error="HTTP 503") for _ in batch]

    server = serve("ipd", agent=Down())
    gid = server.new_game()["game_id"]
    state = server.settle(gid)
    assert state["model_unavailable"] and state["your_turn"]  # simultaneous: the person may move
    assert server.turn(gid, {"action": "DEFECT"}).status_code == 200
    assert not server.settle(gid)["over"] and server.human(gid).episode.error is None
