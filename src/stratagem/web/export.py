"""The stored games of one configuration as a run folder (``stratagem serve --export``).

A configuration is everything about the opponent that changes its play: the game, its version
and parameters, and the agent's configuration (its spec; for a language model the sampling
settings, dtype, fallback, base URL, adapters with their content hashes and the weights'
fingerprint). ``records.configuration_id`` names one; every stored game carries its id, and an
export holds one configuration only, so metrics never pool different models: a database holding
several is refused, the message naming each configuration by id with the settings that tell
them apart, and ``config`` (``--export-config ID``) picks one. A study's consent and instructions
text is part of its configuration (``instructions_sha256``): two conditions that tell people
different things never pool.

The folder holds ``traces.jsonl`` (the finished games' traces), ``games.jsonl`` (every game of
the configuration, finished, abandoned or live, with its status, participant, consent, scores,
views and trace) and a ``run.json`` whose fingerprint says ``job: eval``, so ``stratagem report
FOLDER`` computes every metric of the game on human-model games (the model is the evaluated seat:
``meta.seat``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from stratagem.errors import ConfigError
from stratagem.trace import dumps
from stratagem.web.records import GameRecord

GAMES = "games.jsonl"


class Store(Protocol):
    """What an export reads of the games database (``storage.GameStore``)."""

    path: Path

    def records(self, game: str | None = None) -> list[GameRecord]:
        """The stored games of ``game``, oldest first."""
        ...


def export_run(
    store: Store,
    game: str,
    folder: str | Path,
    agent: str | None = None,
    config: str | None = None,
) -> int:
    """Writes the games of ``game`` in ``store`` played with one configuration as a run folder
    that ``stratagem report`` reads; returns how many finished games it holds.

    Args:
        store: the games database.
        game: the game id whose games are exported.
        folder: the run folder (new, or an earlier export of the same configuration).
        agent: only the games of this agent spec.
        config: only the games of the configuration whose id starts with this.

    Raises:
        ConfigError: no finished game matches; the games were played with several
            configurations (named in the message); the folder holds something other than an
            earlier export of the same configuration.
    """
    records = [
        r
        for r in store.records(game)
        if agent in (None, r.agent_spec) and r.config_id.startswith(config or "")
    ]
    return export_records(records, game, folder, store.path, agent=agent, config=config)


def export_records(
    records: Sequence[GameRecord],
    game: str,
    folder: str | Path,
    database: str | Path,
    agent: str | None = None,
    config: str | None = None,
) -> int:
    """Writes ``records`` (the games of ``game`` in ``database``, already filtered by ``agent``
    and ``config``) as a run folder; returns how many finished games it holds.

    Raises:
        ConfigError: none of them is finished; they hold several configurations; the folder
            holds something other than an earlier export of this configuration.
    """
    from stratagem.runs import MANIFEST, TRACES, check_out_path

    finished = [r for r in records if r.status == "finished"]
    if not finished:
        which = f" played by {agent}" if agent else ""
        which += f" of configuration {config}" if config else ""
        raise ConfigError(f"{database} holds no finished {game} game{which} to export")
    groups: dict[str, list[GameRecord]] = {}
    for record in records:
        groups.setdefault(record.config_id, []).append(record)
    if len(groups) > 1:
        raise ConfigError(_several(groups, game, database))
    first = finished[0]
    out = check_out_path(folder)
    manifest = out / MANIFEST
    _check_folder(out, manifest, first.config_id)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / TRACES, [r.trace.to_json() for r in finished])
    _write(out / GAMES, [dumps(_game_line(r)) for r in records])
    manifest.write_text(_manifest_text(records, finished, game, database), encoding="utf-8")
    return len(finished)


def _check_folder(out: Path, manifest: Path, config_id: str) -> None:
    """Raises ``ConfigError`` unless ``out`` is empty, missing, or an earlier export (by
    ``serve``) of configuration ``config_id``."""
    if not (out.exists() and any(out.iterdir())):
        return
    try:
        earlier = json.loads(manifest.read_text(encoding="utf-8"))["fingerprint"]
        source, earlier_id = earlier["source"], earlier.get("config_id", config_id)
    except (OSError, ValueError, KeyError, TypeError):
        source = earlier_id = None
    if source != "serve":
        raise ConfigError(f"{out} is not empty; export into a new folder")
    if earlier_id != config_id:
        raise ConfigError(
            f"{out} holds the export of configuration {earlier_id}, not {config_id}; "
            "export into a new folder"
        )


def _fingerprint(first: GameRecord, game: str) -> dict[str, Any]:
    """The ``run.json`` fingerprint of an export whose first finished game is ``first``: an
    ``eval`` job by ``serve``, with the configuration its games were played with."""
    told = first.configuration.get("instructions_sha256")
    return {
        "job": "eval",
        "source": "serve",
        "game": game,
        "game_version": first.game_version,
        "game_params": dict(first.game_params),
        "agent": first.agent_name,
        "agent_spec": first.agent_spec,
        "config_id": first.config_id,
        "configuration": dict(first.configuration.get("agent") or {"spec": first.agent_spec}),
        **({"instructions_sha256": told} if told else {}),
        "normalise": False,
    }


def _manifest_text(
    records: Sequence[GameRecord],
    finished: Sequence[GameRecord],
    game: str,
    database: str | Path,
) -> str:
    """The ``run.json`` text of an export of ``records``, of which ``finished`` (not empty) are
    finished, stamped with the time now."""
    first = finished[0]
    counts = {s: sum(r.status == s for r in records) for s in ("finished", "abandoned", "live")}
    manifest = {
        "fingerprint": _fingerprint(first, game),
        "status": "complete",
        "episodes": len(finished),
        "games": counts,
        "server": dict(first.configuration.get("server") or {}),
        "exported": _now(),
        "database": str(database),
    }
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def _write(path: Path, lines: list[str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(path)


def _game_line(record: GameRecord) -> dict[str, Any]:
    return {
        "game_id": record.game_id,
        "status": record.status,
        "participant": record.participant,
        "consent": None if record.consent is None else dict(record.consent),
        "human_seat": record.human_seat,
        "human_score": record.human_score,
        "model_score": record.model_score,
        "started": record.started,
        "ended": record.ended,
        "config_id": record.config_id,
        "human_view": dict(record.human_view),
        "model_view": dict(record.model_view),
        "trace": json.loads(record.trace.to_json()),
    }


def _several(groups: Mapping[str, Sequence[GameRecord]], game: str, database: str | Path) -> str:
    """The refusal of a mixed export: each configuration by id, with the settings (only those
    that differ between them) and its number of games."""
    settings = {}
    for cid, records in groups.items():
        first = records[0]
        agent = first.configuration.get("agent") or {"spec": first.agent_spec}
        told = {"instructions_sha256": first.configuration.get("instructions_sha256")}
        settings[cid] = _flat({"game_params": dict(first.game_params), **agent, **told})
    keys = sorted({k for flat in settings.values() for k in flat})
    differ = [k for k in keys if len({json.dumps(s.get(k)) for s in settings.values()}) > 1]
    shown = [
        f"{cid} ({', '.join(f'{k}={settings[cid].get(k)}' for k in differ)}; "
        f"{len(groups[cid])} game{'s' * (len(groups[cid]) != 1)})"
        for cid in groups
    ]
    specs = {records[0].agent_spec for records in groups.values()}
    what = "several agents" if len(specs) > 1 else "several configurations"
    if "game_params" in {k.split(".")[0] for k in differ}:
        what += " with different game parameters"
    return (
        f"{database} holds {game} games of {what}: {'; '.join(shown)}. A run folder holds one "
        "configuration: export each with --export-config ID (into its own folder)"
    )


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists kept whole)."""
    if not isinstance(value, Mapping):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
