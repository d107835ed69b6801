"""Every stored game names its configuration, and an export holds one configuration only: two
configurations that differ only in temperature, or only in an adapter's content, are refused as
a mix (named by id with the setting that differs) and export to two run folders that
``stratagem report`` reads. Older databases are upgraded in place."""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
import stat

import pandas as pd
import pytest
from typer.testing import CliRunner

from stratagem.agents.llm import LLMAgent
from stratagem.agents.spec import LLMOptions
from stratagem.backends.base import Sampling
from stratagem.backends.cache import weights_fingerprint
from stratagem.backends.scripted import ScriptedBackend
from stratagem.cli.main import app as cli
from stratagem.errors import ConfigError
from stratagem.games import get_game
from stratagem.metrics.bargaining import summarise
from stratagem.metrics.bargaining.rows import negotiation_rows
from stratagem.runs import read_fingerprint
from stratagem.strategies import get_strategy
from stratagem.trace import read_traces
from stratagem.web import storage
from stratagem.web.records import COLUMNS
from stratagem.web.settings import ServeSettings
from stratagem.web.storage import GameStore, export_run
from stratagem.web.study import Study, agent_configuration, server_settings

from .conftest import scripted
from .test_api import BARGAINING, dond_model, finish_dond


def configured(serve, dond_contexts, options: LLMOptions, db: str = "games.db"):
    """A Deal or No Deal server (the person in seat 0) whose scripted model is configured by
    ``options``."""
    agent = scripted(get_game("dond", contexts=dond_contexts), dond_model)
    configuration = agent_configuration("hf:scripted", agent, options)
    return serve(
        "dond",
        agent=agent,
        params={"contexts": dond_contexts},
        seat=0,
        spec="hf:scripted",
        db=db,
        study=Study(configuration=configuration, server={"port": 8000}),
    )


def metrics(folder) -> dict[str, dict]:
    with open(folder / "metrics.csv") as f:
        return {row["metric"]: row for row in csv.DictReader(f)}


def test_rows_record_the_configuration_and_the_server_settings(serve, dond_contexts):
    server = configured(serve, dond_contexts, LLMOptions(temperature=0.7, top_p=0.9))
    finish_dond(server)
    [row] = server.service.store.records()
    agent = row.configuration["agent"]
    assert agent["spec"] == "hf:scripted" and agent["model_id"] == "scripted"
    assert (agent["temperature"], agent["top_p"], agent["max_new_tokens"]) == (0.7, 0.9, 64)
    assert (agent["dtype"], agent["fallback"], agent["base_url"]) == ("auto", "argmax", None)
    assert agent["adapters"] == [] and agent["weights"] is None
    assert row.configuration["server"] == {"port": 8000}
    assert row.config_id == server.service.config_id and len(row.config_id) == 12
    assert row.trace.meta["config_id"] == row.config_id


def test_two_temperatures_are_two_configurations(serve, dond_contexts, tmp_path):
    cold = configured(serve, dond_contexts, LLMOptions(temperature=0.0))
    warm = configured(serve, dond_contexts, LLMOptions(temperature=0.7))
    warm.service.store = cold.service.store  # one database, as two servers in turn would share
    for _ in range(2):
        finish_dond(cold)
    finish_dond(warm)
    store = cold.service.store
    a, b = cold.service.config_id, warm.service.config_id
    assert a != b
    with pytest.raises(ConfigError) as refused:
        export_run(store, "dond", tmp_path / "mixed")
    message = str(refused.value)
    assert "several configurations" in message and "--export-config" in message
    assert f"{a} (temperature=0.0; 2 games)" in message
    assert f"{b} (temperature=0.7; 1 game)" in message
    assert not (tmp_path / "mixed").exists()
    assert export_run(store, "dond", tmp_path / "cold", config=a) == 2
    assert export_run(store, "dond", tmp_path / "warm", config=b[:6]) == 1
    for folder, n, temperature in ((tmp_path / "cold", 2, 0.0), (tmp_path / "warm", 1, 0.7)):
        fp = read_fingerprint(folder)
        assert fp["configuration"]["temperature"] == temperature
        result = CliRunner().invoke(cli, ["report", str(folder)])
        assert result.exit_code == 0, result.output
        score = metrics(folder)["score"]
        assert (score["n"], float(score["value"])) == (str(n), 8.0)
    with pytest.raises(ConfigError, match=f"holds the export of configuration {a}"):
        export_run(store, "dond", tmp_path / "cold", config=b)


def test_two_adapters_are_two_configurations(serve, dond_contexts, tmp_path):
    first, second = tmp_path / "sft", tmp_path / "sft-again"
    for folder, weights in ((first, b"\x01" * 64), (second, b"\x02" * 64)):
        folder.mkdir()
        (folder / "adapter_model.safetensors").write_bytes(weights)
        (folder / "adapter_config.json").write_text('{"r": 8}')
    one = configured(serve, dond_contexts, LLMOptions(adapter=str(first)))
    two = configured(serve, dond_contexts, LLMOptions(adapter=str(second)))
    two.service.store = one.service.store
    finish_dond(one)
    finish_dond(two)
    store = one.service.store
    [r1, r2] = store.records()
    h1, h2 = (r.configuration["agent"]["adapters"][0]["sha256"] for r in (r1, r2))
    assert h1 != h2 and r1.config_id != r2.config_id
    with pytest.raises(ConfigError, match="several configurations") as refused:
        export_run(store, "dond", tmp_path / "mixed")
    assert "adapters=" in str(refused.value) and "adapter=" in str(refused.value)
    for record in (r1, r2):
        out = tmp_path / f"export-{record.config_id}"
        assert export_run(store, "dond", out, config=record.config_id) == 1
        assert CliRunner().invoke(cli, ["report", str(out)]).exit_code == 0
        adapters = read_fingerprint(out)["configuration"]["adapters"]
        assert adapters == record.configuration["agent"]["adapters"]
    # the same files moved to another folder keep their content hash
    moved = tmp_path / "moved"
    first.rename(moved)
    agent = scripted(get_game("dond"), dond_model)
    again = agent_configuration("hf:scripted", agent, LLMOptions(adapter=str(moved)))
    assert again["adapters"][0]["sha256"] == h1


def test_the_export_command_names_the_configurations(serve, dond_contexts, tmp_path):
    cold = configured(serve, dond_contexts, LLMOptions(temperature=0.0))
    warm = configured(serve, dond_contexts, LLMOptions(temperature=0.7))
    warm.service.store = cold.service.store
    finish_dond(cold)
    finish_dond(warm)
    db = str(cold.service.store.path)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["serve", "--db", db, "--export", str(out)])
    assert result.exit_code != 0 and isinstance(result.exception, ConfigError)
    assert cold.service.config_id in str(result.exception)
    assert warm.service.config_id in str(result.exception)
    args = ["serve", "--db", db, "--export", str(out), "--export-config", warm.service.config_id]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "exported 1 dond games" in result.output
    assert read_fingerprint(out)["config_id"] == warm.service.config_id


def test_the_export_keeps_every_game_with_its_status(serve, dond_contexts, tmp_path):
    server = configured(serve, dond_contexts, LLMOptions())
    finished = finish_dond(server)["game_id"]
    left = server.new_game()["game_id"]
    server.client.post(f"/api/games/{left}/leave", headers={"Origin": "http://testserver"})
    live = server.new_game()["game_id"]
    out = tmp_path / "out"
    assert export_run(server.service.store, "dond", out) == 1
    lines = [json.loads(x) for x in (out / "games.jsonl").read_text().splitlines()]
    assert [(g["game_id"], g["status"]) for g in lines] == [
        (finished, "finished"),
        (left, "abandoned"),
        (live, "live"),
    ]
    assert [t.episode_id for t in read_traces(out / "traces.jsonl")] == [finished]
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["games"] == {"finished": 1, "abandoned": 1, "live": 1}


def test_a_bargaining_export_reads_with_the_bargaining_metrics(serve, tmp_path):
    script = (
        'Thought: fine\nCode:\n```py\nsend_message(content="Deal.")\nmake_offer(price=7500)\n```'
    )
    server = serve("bargaining", agent=lambda g: scripted(g, [script]), params=BARGAINING, seat=0)
    gid = server.new_game()["game_id"]
    server.turn(gid, {"kind": "offer", "price": 7990, "message": "Mint"})
    server.settle(gid)
    assert server.turn(gid, {"kind": "accept"}).status_code == 200
    assert server.settle(gid)["over"]
    out = tmp_path / "bargaining"
    assert export_run(server.service.store, "bargaining", out) == 1
    result = CliRunner().invoke(cli, ["report", str(out)])
    assert result.exit_code != 0
    assert "stratagem tournament --game bargaining" in str(result.exception)
    rows = negotiation_rows(read_traces(out / "traces.jsonl"))  # what the README says to use
    assert [(r["role"], r["deal"]) for r in rows] == [("seller", True), ("buyer", True)]
    table = summarise(pd.DataFrame(rows))
    deals = table[table.metric == "deal"].set_index("role")["value"]
    assert deals.to_dict() == {"buyer": 1.0, "seller": 1.0}


V1_SCHEMA = """
CREATE TABLE games (
    id INTEGER PRIMARY KEY AUTOINCREMENT, game_id TEXT NOT NULL UNIQUE, game TEXT NOT NULL,
    game_version INTEGER NOT NULL, game_params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('finished', 'abandoned')),
    agent_spec TEXT NOT NULL, agent_name TEXT NOT NULL,
    human_seat INTEGER NOT NULL CHECK (human_seat IN (0, 1)), human_score REAL,
    model_score REAL, started TEXT NOT NULL, ended TEXT NOT NULL, human_view TEXT NOT NULL,
    model_view TEXT NOT NULL, trace TEXT NOT NULL
)
"""


def test_an_older_database_is_upgraded_with_its_rows(serve, dond_contexts, tmp_path):
    server = serve("dond", params={"contexts": dond_contexts}, seat=0, db="new.db")
    finish = server.new_game()["game_id"]
    server.service.shutdown()
    [record] = server.service.store.records()
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:
        db.execute(V1_SCHEMA)
        values = record.row()[:15]  # the version-1 columns
        db.execute(f"INSERT INTO games VALUES (NULL, {', '.join('?' * 15)})", values)
    old.chmod(0o644)
    store = GameStore(old)
    assert stat.S_IMODE(old.stat().st_mode) == 0o600  # tightened: it holds what people typed
    [upgraded] = store.records()
    assert upgraded.game_id == finish and upgraded.status == "abandoned"
    assert upgraded.configuration == {"agent": {"spec": "strategy:FairSplit"}}
    assert upgraded.config_id == record.config_id  # a spec-only configuration: the same id
    assert upgraded.participant is None and upgraded.consent is None
    with sqlite3.connect(old) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
    store.close()


def test_a_version_2_database_gains_the_consent_column(serve, dond_contexts, tmp_path):
    server = serve("dond", params={"contexts": dond_contexts}, seat=0, db="new.db")
    server.new_game()
    server.service.shutdown()
    [record] = server.service.store.records()
    old = tmp_path / "v2.db"
    with sqlite3.connect(old) as db:  # the version-2 table: every column but consent
        v2 = storage.SCHEMA.replace("participant TEXT,\n    consent TEXT", "participant TEXT")
        db.execute(v2)
        db.execute("PRAGMA user_version = 2")
        columns = ", ".join(COLUMNS[:-1])
        marks = ", ".join("?" * 18)
        db.execute(f"INSERT INTO games ({columns}) VALUES ({marks})", record.row()[:-1])
    store = GameStore(old)
    [upgraded] = store.records()
    assert (upgraded.game_id, upgraded.consent) == (record.game_id, None)
    assert upgraded.config_id == record.config_id
    with sqlite3.connect(old) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
    store.close()


def test_the_weights_are_named_by_their_content(tmp_path):
    agent = scripted(get_game("dond"), dond_model)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"w" * 32)
    (folder / "config.json").write_text("{}")
    options = LLMOptions(dtype="bfloat16")
    local = agent_configuration(f"vllm:{folder}", agent, options)
    assert local["weights"] == weights_fingerprint(folder, (), "bfloat16")
    assert local["model_id"] == "scripted" and local["dtype"] == "bfloat16"
    (folder / "model.safetensors").write_bytes(b"v" * 33)
    assert agent_configuration(f"vllm:{folder}", agent, options)["weights"] != local["weights"]
    agent.backend.fingerprint = "SmolLM2#0123abcd@rev1"  # what HFBackend.fingerprint reads
    assert agent_configuration("hf", agent, options)["weights"] == "SmolLM2#0123abcd@rev1"
    hub = scripted(get_game("dond"), dond_model)
    assert agent_configuration("hf:org/model", hub, options)["weights"] is None  # not local
    strategy = get_strategy("dond", "FairSplit")
    assert agent_configuration("strategy:FairSplit", strategy) == {"spec": "strategy:FairSplit"}


def test_the_server_settings_are_recorded(tmp_path):
    consent = tmp_path / "consent.txt"
    consent.write_text("Terms.")
    cfg = ServeSettings(agent="strategy:FairSplit", port=8123, consent=str(consent))
    settings = server_settings(cfg)
    assert settings["port"] == 8123 and settings["agent"] == "strategy:FairSplit"
    assert settings["consent_sha256"] == hashlib.sha256(b"Terms.").hexdigest()
    assert settings["turns_per_minute"] == 30 and settings["participant_id"] is False
    assert "export" not in settings and "export_config" not in settings


def test_without_a_study_the_configuration_is_read_from_the_agent(serve, dond_contexts, tmp_path):
    def agent(temperature):
        game = get_game("dond", contexts=dond_contexts)
        return LLMAgent(ScriptedBackend(dond_model), game, Sampling(temperature=temperature))

    kw = {"params": {"contexts": dond_contexts}, "seat": 0, "spec": "hf:scripted"}
    cold = serve("dond", agent=agent(0.0), **kw)
    warm = serve("dond", agent=agent(0.7), **kw)
    warm.service.store = cold.service.store
    finish_dond(cold)
    finish_dond(warm)
    [a, b] = cold.service.store.records()
    assert a.configuration["agent"] == {
        "spec": "hf:scripted",
        "temperature": 0.0,
        "top_p": 1.0,
        "max_new_tokens": 64,
        "fallback": "argmax",
        "model_id": "scripted",
        "weights": None,
    }
    assert b.configuration["agent"]["temperature"] == 0.7 and a.config_id != b.config_id
    with pytest.raises(ConfigError, match="temperature=0.0; 1 game"):
        export_run(cold.service.store, "dond", tmp_path / "mixed")
