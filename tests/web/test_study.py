"""The play page as a study (TestClient): the consent screen and participant id gate the first
game, every row records its participant, the participant's counter and running total, the
result of a game kept for a reload, every game a row from its start, a game the server no longer
holds answering 404 with its status, the operator's summary behind its token, and the database
file readable by its owner only."""

from __future__ import annotations

import stat

import pytest

from stratagem.web import study as study_module
from stratagem.web.issued import code_of
from stratagem.web.storage import GameStore
from stratagem.web.study import Study, participant_id

from .conftest import KEY, ORIGIN, other_client, scripted
from .test_api import BARGAINING, dond_server, finish_dond

TERMS = "You will play Deal or No Deal against a computer.\nYour answers are stored."
TOKEN = "operator-" + "t" * 40


def study_server(serve, dond_contexts, **kw):
    study = Study(consent=TERMS, ask_participant=True, operator_token=TOKEN)
    return dond_server(serve, dond_contexts, study=study, **kw)


def join(client, **body):
    return client.post("/api/study", json=body, headers={"Origin": ORIGIN})


def test_consent_and_participant_id_come_before_the_first_game(serve, dond_contexts):
    server = study_server(serve, dond_contexts)
    c = server.client
    state = c.get("/api/study").json()
    assert state["consent"] == TERMS and state["ask_participant"]
    assert state["participant"] is None and not state["consented"]
    assert state["refusal"] == "give your participant id first"
    r = c.post("/api/games", headers={"Origin": ORIGIN})
    assert r.status_code == 403 and r.json()["detail"] == "give your participant id first"
    for bad in ("", "has space", "<script>", "x" * 65, 7, "-lead"):
        assert join(c, participant=bad).status_code == 422, bad
    assert join(c, participant="P-007", extra=1).status_code == 422
    assert join(c, consent="yes").status_code == 422
    r = c.post("/api/study", json={"participant": "P-007"}, headers={"Origin": "http://evil.test"})
    assert r.status_code == 403
    r = join(c, participant="P-007")
    assert r.status_code == 200 and "stratagem_session" in r.cookies
    assert r.json()["refusal"] == "read and accept the study's terms first"
    assert c.post("/api/games", headers={"Origin": ORIGIN}).status_code == 403
    state = join(c, consent=True).json()
    assert state["participant"] == "P-007" and state["consented"] and state["refusal"] is None
    finish_dond(server)
    [row] = server.service.store.records()
    assert row.participant == "P-007" and row.status == "finished"


def test_an_issued_participants_counter_and_total_span_sessions(serve, dond_contexts):
    study = Study(consent=TERMS, issued_ids=True, operator_token=TOKEN)
    server = dond_server(serve, dond_contexts, study=study)
    first, second = server.client, other_client(server)
    for client in (first, second):
        join(client, participant=f"P-1.{code_of(KEY, 'P-1')}", consent=True)
    empty = first.get("/api/study").json()
    assert (empty["finished"], empty["abandoned"], empty["total"], empty["last"]) == (0, 0, 0, None)
    finish_dond(server, first)
    finish_dond(server, second)
    gid = server.new_game(first)["game_id"]
    first.post(f"/api/games/{gid}/leave", headers={"Origin": ORIGIN})
    state = second.get("/api/study").json()
    assert (state["finished"], state["abandoned"], state["total"]) == (2, 1, 12.0)
    assert state["last"] == {
        "game_id": gid,
        "status": "abandoned",
        "your_score": None,
        "model_score": None,
    }
    other = other_client(server)
    join(other, participant=f"P-2.{code_of(KEY, 'P-2')}", consent=True)
    last = finish_dond(server, other)
    state = other.get("/api/study").json()
    assert (state["finished"], state["total"]) == (1, 6.0)
    assert state["last"] == {
        "game_id": last["game_id"],
        "status": "finished",
        "your_score": 6.0,
        "model_score": 8.0,
    }


def test_without_a_study_the_counter_is_the_sessions(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    state = server.client.get("/api/study").json()
    assert state["consent"] is None and not state["ask_participant"] and state["refusal"] is None
    finish_dond(server)
    finish_dond(server)
    other = other_client(server)
    finish_dond(server, other)
    state = server.client.get("/api/study").json()
    assert (state["participant"], state["finished"], state["total"]) == (None, 2, 12.0)


def test_the_participant_id_cannot_change_during_a_game(serve, dond_contexts):
    server = study_server(serve, dond_contexts)
    join(server.client, participant="P-1", consent=True)
    gid = server.new_game()["game_id"]
    assert join(server.client, participant="P-2").status_code == 409
    assert join(server.client, participant="P-1").status_code == 200
    server.client.post(f"/api/games/{gid}/leave", headers={"Origin": ORIGIN})
    assert join(server.client, participant="P-2").json()["participant"] == "P-2"


def test_the_result_is_kept_for_a_reload(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    state = finish_dond(server)
    gid = state["game_id"]
    # a reload asks for the session's game, then its state: the ended game, with its result
    assert server.client.get("/api/session").json()["live"] == gid
    again = server.client.get(f"/api/games/{gid}").json()
    assert again["over"] and again["outcome"] == state["outcome"]
    assert again["outcome"]["your_score"] == 6.0 and again["outcome"]["model_proposal"] == [2, 0, 1]
    started = server.new_game()["game_id"]
    assert server.client.get("/api/session").json()["live"] == started


def test_the_bargaining_price_is_kept_for_a_reload(serve):
    script = 'Thought: ok\nCode:\n```py\nsend_message(content="Fine.")\nmake_offer(price=7500)\n```'
    server = serve("bargaining", agent=lambda g: scripted(g, [script]), params=BARGAINING, seat=0)
    gid = server.new_game()["game_id"]
    server.turn(gid, {"kind": "offer", "price": 7990, "message": "Mint"})
    server.settle(gid)
    server.turn(gid, {"kind": "accept"})
    done = server.settle(gid)
    assert server.client.get("/api/session").json()["live"] == gid
    again = server.client.get(f"/api/games/{gid}").json()
    assert again["outcome"] == done["outcome"] and again["outcome"]["price"] == 7500.0


def test_a_game_is_a_row_from_its_start_and_follows_its_moves(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    gid = server.new_game()["game_id"]
    [row] = server.service.store.records()
    assert (row.game_id, row.status, row.human_score) == (gid, "live", None)
    assert row.trace.status == "error" and row.trace.error == "live"
    assert server.service.store.count() == 0  # a live row is progress, not a result
    server.turn(gid, {"kind": "message", "text": "first words"})
    server.settle(gid)
    [row] = server.service.store.records()
    assert row.status == "live" and "first words" in row.trace.to_json()
    assert "Books matter most to me." in row.trace.to_json()  # the model's answer too
    server.turn(gid, {"kind": "propose", "books": 0, "hats": 2, "balls": 1})
    server.settle(gid)
    [row] = server.service.store.records()
    assert row.status == "finished" and row.trace.status == "complete"
    assert (row.human_score, row.model_score) == (6.0, 8.0)


def test_abandon_live_ends_the_rows_a_killed_server_left(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    finished = finish_dond(server)["game_id"]
    live = server.new_game()["game_id"]
    store = GameStore(server.service.store.path)  # the next server, on the same file
    assert store.abandon_live() == 1 and store.abandon_live() == 0
    rows = {r.game_id: r for r in store.records()}
    assert rows[finished].status == "finished"
    assert rows[live].status == "abandoned"
    assert rows[live].trace.status == "error" and rows[live].trace.error == "abandoned"


def test_a_game_no_longer_held_answers_404_with_its_status(serve, dond_contexts):
    now = [0.0]
    server = dond_server(serve, dond_contexts, clock=lambda: now[0])
    finished = finish_dond(server)["game_id"]
    now[0] += 10_000
    server.service.reap()
    r = server.client.get(f"/api/games/{finished}")
    assert r.status_code == 404
    assert r.json() == {
        "detail": "this game is no longer here (it is finished); start a new one",
        "gone": True,
        "status": "finished",
    }
    r = server.client.get("/api/games/" + "A" * 43)
    assert r.json() == {"detail": "no such game; start a new one", "gone": True, "status": None}
    r = server.turn(finished, {"kind": "message", "text": "still there?"})
    assert r.status_code == 404 and r.json()["gone"]


def test_the_operators_summary_needs_its_token(serve, dond_contexts, monkeypatch):
    compared = []
    real = study_module.hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(study_module.hmac, "compare_digest", spy)
    server = study_server(serve, dond_contexts)
    c = server.client
    join(c, participant="P-1", consent=True)
    finish_dond(server)
    finish_dond(server)
    gid = server.new_game()["game_id"]
    c.post(f"/api/games/{gid}/leave", headers={"Origin": ORIGIN})
    server.new_game()
    wrong = "operator-" + "x" * 40
    for path in ("/operator", "/api/operator"):
        assert c.get(path).status_code == 403
        assert c.get(path, headers={"Authorization": f"Bearer {wrong}"}).status_code == 403
        assert c.get(path, params={"token": wrong}).status_code == 403
        assert c.get(path, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 403
    assert (wrong.encode(), TOKEN.encode()) in compared  # hmac.compare_digest: constant time
    r = c.get("/api/operator", headers={"Authorization": f"Bearer {TOKEN}"})
    [entry] = r.json()
    assert r.headers["cache-control"] == "no-store"
    assert entry["config_id"] == server.service.config_id and entry["agent_spec"] == "hf:scripted"
    assert (entry["games"], entry["finished"], entry["abandoned"], entry["live"]) == (4, 2, 1, 1)
    assert entry["completion_rate"] == pytest.approx(2 / 3) and entry["participants"] == 1
    assert (entry["human_mean"], entry["model_mean"]) == (6.0, 8.0)
    page = c.get("/operator", params={"token": TOKEN})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f"<td>{server.service.config_id}</td>" in page.text and "<td>67%</td>" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert "default-src 'self'" in page.headers["content-security-policy"]


def test_without_a_token_nobody_reads_the_summary(serve, dond_contexts):
    server = dond_server(serve, dond_contexts)
    assert server.client.get("/api/operator", params={"token": ""}).status_code == 403
    assert server.client.get("/operator").status_code == 403


def test_the_summary_page_escapes_what_it_shows():
    entry = {
        "config_id": "c0ffee",
        "game": "dond",
        "agent_spec": "openai:<script>alert(1)</script>",
        "agent": {"spec": "x", "base_url": "http://h/<b>"},
        "games": 1,
        "finished": 0,
        "abandoned": 0,
        "live": 1,
        "completion_rate": None,
        "participants": 0,
        "human_mean": None,
        "model_mean": None,
    }
    page = study_module.summary_page([entry])
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;" in page


def test_participant_ids():
    assert participant_id("P-007") == "P-007" and participant_id("a.b_c") == "a.b_c"


def test_the_database_is_readable_by_its_owner_only(tmp_path):
    store = GameStore(tmp_path / "fresh" / "games.db")
    store.records()
    for name in ("games.db", "games.db-wal", "games.db-shm"):
        path = tmp_path / "fresh" / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    store.close()
