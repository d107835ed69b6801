"""Participants on a shared computer (TestClient): consent belongs to a participant, not to the
browser; another id in the same browser is a new session asked to consent again, and every row
records the consent its own participant gave; an id change while a game is in play is refused
with a message (or leaves that game first when asked)."""

from __future__ import annotations

import hashlib
import json

from stratagem.web.storage import export_run
from stratagem.web.study import Study

from .conftest import ORIGIN
from .test_api import finish_dond
from .test_study import TERMS, join, study_server

TERMS_SHA = hashlib.sha256(TERMS.encode()).hexdigest()


def test_a_second_id_in_one_browser_is_asked_to_consent(serve, dond_contexts, tmp_path):
    server = study_server(serve, dond_contexts)
    c = server.client
    first = join(c, participant="A", consent=True)
    cookie_a = first.cookies["stratagem_session"]
    finish_dond(server)
    r = join(c, participant="B")  # the same browser, a ?pid=B link, no consent given
    assert r.status_code == 200
    assert r.cookies["stratagem_session"] != cookie_a  # a new session
    state = r.json()
    assert (state["participant"], state["consented"]) == ("B", False)
    assert state["refusal"] == "read and accept the study's terms first"
    assert (state["finished"], state["total"], state["last"]) == (0, 0, None)  # not A's
    assert c.get("/api/session").json()["live"] is None  # A's game is not on B's screen
    assert c.post("/api/games", headers={"Origin": ORIGIN}).status_code == 403
    assert join(c, consent=True).json()["consented"] is True
    finish_dond(server)
    rows = server.service.store.records()
    consents = [(r.participant, r.consent["sha256"]) for r in rows]
    assert consents == [("A", TERMS_SHA), ("B", TERMS_SHA)]
    assert rows[0].consent["at"] <= rows[1].consent["at"]  # each its own, given in turn
    export_run(server.service.store, "dond", tmp_path / "out")
    lines = [json.loads(x) for x in (tmp_path / "out" / "games.jsonl").read_text().splitlines()]
    assert [(g["participant"], g["consent"]["sha256"]) for g in lines] == [
        ("A", TERMS_SHA),
        ("B", TERMS_SHA),
    ]


def test_a_changed_text_asks_again():
    record = {"sha256": hashlib.sha256(b"version 1").hexdigest(), "at": "2025-01-01T00:00:00"}
    assert Study(consent="version 1").refusal("A", record) is None
    again = Study(consent="version 2").refusal("A", record)
    assert again == "read and accept the study's terms first"
    assert Study().refusal("A", None) is None  # no text, nothing to accept


def test_an_id_change_during_a_game_is_answered(serve, dond_contexts):
    server = study_server(serve, dond_contexts)
    c = server.client
    join(c, participant="A", consent=True)
    gid = server.new_game()["game_id"]
    r = join(c, participant="B")
    assert r.status_code == 409
    assert r.json()["detail"] == (
        "participant A has a game in play in this browser: finish or leave it before starting as B"
    )
    assert c.get("/api/study").json()["participant"] == "A"  # nothing changed
    r = join(c, participant="B", leave=True)
    assert r.status_code == 200 and r.json()["participant"] == "B" and not r.json()["consented"]
    [row] = server.service.store.records()
    assert (row.game_id, row.status, row.participant) == (gid, "abandoned", "A")
    assert join(c, participant="C", leave="yes").status_code == 422
