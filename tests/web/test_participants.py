"""Participants on a shared computer (TestClient): consent belongs to a participant, not to the
browser; another id in the same browser is a new session asked to consent again, and every row
records the consent its own participant gave; an id change while a game is in play is refused
with a message (or leaves that game first when asked)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from typer.testing import CliRunner

from stratagem.errors import ConfigError
from stratagem.web.issued import code_of, issue_ids
from stratagem.web.records import configuration_id
from stratagem.web.security import session_key
from stratagem.web.storage import export_run
from stratagem.web.study import Study

from .conftest import KEY, ORIGIN, other_client
from .test_api import dond_server, finish_dond
from .test_storage import _cli
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


def issued_server(serve, dond_contexts, **kw):
    study = Study(consent=TERMS, issued_ids=True)
    return dond_server(serve, dond_contexts, study=study, **kw)


def test_an_id_without_its_code_is_refused(serve, dond_contexts):
    server = issued_server(serve, dond_contexts)
    holder, stranger = server.client, other_client(server)
    assert holder.get("/api/study").json()["issued_ids"] is True
    r = join(holder, participant=f"P001.{code_of(KEY, 'P001')}", consent=True)
    assert r.status_code == 200 and r.json()["participant"] == "P001"
    finish_dond(server)
    refused = "this participant id is not one issued for this study; use the link you were given"
    for guess in ("P001", f"P001.{code_of(KEY, 'P002')}", "P001.aaaaaaaaaa", "P001."):
        r = join(stranger, participant=guess, consent=True)
        assert (r.status_code, r.json()["detail"]) == (403, refused), guess
    assert stranger.get("/api/study").json()["finished"] == 0  # P001's record stays unseen
    assert stranger.post("/api/games", headers={"Origin": ORIGIN}).status_code == 403
    upper = f"P001.{code_of(KEY, 'P001').upper()}"  # a code read aloud: case does not matter
    state = join(stranger, participant=upper, consent=True).json()
    assert (state["participant"], state["finished"], state["total"]) == ("P001", 1, 6.0)
    assert [r.participant for r in server.service.store.records()] == ["P001"]


def test_a_name_shows_only_the_games_of_its_own_browser(serve, dond_contexts):
    server = study_server(serve, dond_contexts)
    first, second = server.client, other_client(server)
    join(first, participant="P-1", consent=True)
    finish_dond(server, first)
    state = join(second, participant="P-1", consent=True).json()
    assert (state["finished"], state["total"], state["last"]) == (0, 0, None)
    assert first.get("/api/study").json()["finished"] == 1


def test_probing_ids_is_rate_limited(serve, dond_contexts):
    server = issued_server(serve, dond_contexts)
    c = server.client
    join(c, participant=f"P001.{code_of(KEY, 'P001')}")  # the join that made the session
    codes = []
    for n in range(40):  # that session probing: refused past 30 joins an hour
        codes.append(join(c, participant=f"P001.{n:010d}").status_code)
    assert codes == [403] * 30 + [429] * 10
    r = join(c, participant="P002")
    assert r.status_code == 429 and 3590 <= int(r.headers["retry-after"]) <= 3600
    fresh = []
    for n in range(100):  # a new session each time (no cookie): 120 an hour per address
        client = other_client(server)
        fresh.append(join(client, participant=f"P{n:03d}.0000000000").status_code)
    assert fresh == [403] * 89 + [429] * 11  # with the first session's 31: 120 an hour


def test_the_operator_issues_links_the_server_accepts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STRATAGEM_SESSION_KEY", raising=False)
    db = tmp_path / "study" / "games.db"
    result = CliRunner().invoke(_cli(), ["--db", str(db), "--issue", "P051-P053", "--port", "8080"])
    assert result.exit_code == 0, result.output
    key = session_key(tmp_path / "study" / "games.db.key")
    lines = result.stdout.splitlines()
    assert lines == ["participant,code,link"] + [
        f"{p},{code_of(key, p)},http://127.0.0.1:8080/?pid={p}.{code_of(key, p)}"
        for p in ("P051", "P052", "P053")
    ]
    assert not db.exists()  # issuing touches only the key
    again = CliRunner().invoke(_cli(), ["--db", str(db), "--issue", "2"])
    assert [x.split(",")[0] for x in again.stdout.splitlines()[1:]] == ["P001", "P002"]
    assert issue_ids("12")[-1] == "P012" and issue_ids("S7-S9") == ["S7", "S8", "S9"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fifty", "--issue 'fifty': give a count (50) or a range (P051-P100)"),
        ("0", "--issue 0: give 1 to 100,000 ids"),
        ("P9-P1", "--issue P9-P1: give 1 to 100,000 ids"),
        ("1-200000", "--issue 1-200000: give 1 to 100,000 ids"),
        ("A" * 60 + "1-" + "A" * 60 + "2", "ids are at most 53 characters"),
    ],
)
def test_a_bad_issue_is_one_line(spec, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        issue_ids(spec)


def test_the_running_total_is_the_configurations_own(serve, dond_contexts):
    def condition(temperature: float):
        config = {"spec": "hf:scripted", "temperature": temperature}
        study = Study(consent=TERMS, issued_ids=True, configuration=config)
        return dond_server(serve, dond_contexts, study=study, db="shared.db")

    fairsplit, cooperative = condition(0.1), condition(0.9)
    assert fairsplit.service.config_id != cooperative.service.config_id
    link = f"P001.{code_of(KEY, 'P001')}"
    join(fairsplit.client, participant=link, consent=True)
    finish_dond(fairsplit)
    finish_dond(fairsplit)
    join(cooperative.client, participant=link, consent=True)
    state = cooperative.client.get("/api/study").json()
    assert (state["finished"], state["total"], state["last"]) == (0, 0, None)
    last = finish_dond(cooperative)
    state = cooperative.client.get("/api/study").json()
    assert (state["finished"], state["total"], state["last"]["game_id"]) == (
        1,
        6.0,
        last["game_id"],
    )
    assert fairsplit.client.get("/api/study").json()["finished"] == 2
    summary = {e["config_id"]: e["finished"] for e in cooperative.service.store.summary()}
    assert summary == {fairsplit.service.config_id: 2, cooperative.service.config_id: 1}


def test_two_instruction_texts_are_two_configurations(serve, dond_contexts, tmp_path):
    def condition(text: str):
        study = Study(consent=text, ask_participant=True)
        return dond_server(serve, dond_contexts, study=study, db="conditions.db")

    told = {"gain": "You can gain up to 10 points.", "loss": "You can lose up to 10 points."}
    servers = {name: condition(text) for name, text in told.items()}
    ids = {name: server.service.config_id for name, server in servers.items()}
    assert ids["gain"] != ids["loss"]
    for name, server in servers.items():
        join(server.client, participant=f"P-{name}", consent=True)
        finish_dond(server)
    store = servers["gain"].service.store
    with pytest.raises(ConfigError) as refused:
        export_run(store, "dond", tmp_path / "pooled")
    sha = {n: hashlib.sha256(t.encode()).hexdigest() for n, t in told.items()}
    assert str(refused.value) == (
        f"{store.path} holds dond games of several configurations: "
        f"{ids['gain']} (instructions_sha256={sha['gain']}; 1 game); "
        f"{ids['loss']} (instructions_sha256={sha['loss']}; 1 game). A run folder holds one "
        "configuration: export each with --export-config ID (into its own folder)"
    )
    assert not (tmp_path / "pooled").exists()
    for name in told:
        assert export_run(store, "dond", tmp_path / name, config=ids[name]) == 1
        games = (tmp_path / name / "games.jsonl").read_text().splitlines()
        assert [json.loads(g)["participant"] for g in games] == [f"P-{name}"]
        manifest = json.loads((tmp_path / name / "run.json").read_text())["fingerprint"]
        assert (manifest["config_id"], manifest["instructions_sha256"]) == (ids[name], sha[name])
    plain = dond_server(serve, dond_contexts, db="plain.db").service  # no text: the id as before
    game = plain.game
    agent = plain.configuration["agent"]
    assert plain.config_id == configuration_id(game.name, game.version, game.params, agent)
