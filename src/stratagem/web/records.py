"""A stored game as a record: ``GameRecord`` (one row of the games database, ``storage.py``) and
``configuration_id``, the name of the configuration a game was played with (what an export keeps
apart, ``export.py``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from stratagem.trace import Trace, dumps

Status = Literal["live", "finished", "abandoned"]
COLUMNS = (
    "game_id", "game", "game_version", "game_params", "status", "agent_spec", "agent_name",
    "human_seat", "human_score", "model_score", "started", "ended", "human_view", "model_view",
    "trace", "config_id", "configuration", "participant", "consent",
)  # fmt: skip
LIVE_ERROR = "live"  # the trace error of a live row: the episode had not ended when written


@dataclass(frozen=True)
class GameRecord:
    """One stored game (``ended``: when the row was last written, for a live one)."""

    game_id: str
    game: str
    game_version: int
    game_params: Mapping[str, Any]
    status: Status
    agent_spec: str
    agent_name: str
    human_seat: int
    human_score: float | None
    model_score: float | None
    started: str  # ISO 8601, UTC
    ended: str
    human_view: Mapping[str, Any]  # the person's system turn and latest screen
    model_view: Mapping[str, Any]  # the model's system turn and chat
    trace: Trace
    # configuration_id(game, version, params, configuration["agent"], its instructions_sha256)
    config_id: str = ""
    # {"agent": .., "server": .., "instructions_sha256": .. (a study with a consent text only)}
    configuration: Mapping[str, Any] = field(default_factory=dict)
    participant: str | None = None
    # the consent the game was played under: {"sha256": of the text accepted, "at": when},
    # given by this participant in this session; None where the study shows no consent text
    consent: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.config_id:  # a record built without one (older callers): derive it
            agent = self.configuration.get("agent") or {"spec": self.agent_spec}
            told = self.configuration.get("instructions_sha256")
            config = configuration_id(self.game, self.game_version, self.game_params, agent, told)
            object.__setattr__(self, "config_id", config)

    def row(self) -> tuple:
        """Returns the values of ``COLUMNS``, in order."""
        return (
            self.game_id,
            self.game,
            self.game_version,
            dumps(dict(self.game_params)),
            self.status,
            self.agent_spec,
            self.agent_name,
            self.human_seat,
            self.human_score,
            self.model_score,
            self.started,
            self.ended,
            dumps(dict(self.human_view)),
            dumps(dict(self.model_view)),
            self.trace.to_json(),
            self.config_id,
            dumps(dict(self.configuration)),
            self.participant,
            None if self.consent is None else dumps(dict(self.consent)),
        )

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> GameRecord:
        """Returns the record a ``SELECT *`` row holds."""
        return cls(
            game_id=row["game_id"],
            game=row["game"],
            game_version=row["game_version"],
            game_params=json.loads(row["game_params"]),
            status=row["status"],
            agent_spec=row["agent_spec"],
            agent_name=row["agent_name"],
            human_seat=row["human_seat"],
            human_score=row["human_score"],
            model_score=row["model_score"],
            started=row["started"],
            ended=row["ended"],
            human_view=json.loads(row["human_view"]),
            model_view=json.loads(row["model_view"]),
            trace=Trace.from_json(row["trace"]),
            config_id=row["config_id"],
            configuration=json.loads(row["configuration"]),
            participant=row["participant"],
            consent=json.loads(row["consent"]) if row["consent"] else None,
        )


def configuration_id(
    game: str,
    version: int,
    params: Mapping[str, Any],
    agent: Mapping[str, Any],
    instructions: str | None = None,
) -> str:
    """Returns the 12-hex-digit id of a configuration: a sha256 of the game, its version and
    parameters, the agent's configuration (``study.agent_configuration``) and, for a study that
    shows one, the sha256 ``instructions`` of its consent and instructions text (two conditions
    that differ in what people are told are two configurations), as canonical JSON. Without
    ``instructions`` the id is what it was before studies hashed their text."""
    named = {"game": game, "version": version, "params": dict(params), **agent}
    if instructions is not None:
        named["instructions_sha256"] = instructions
    text = json.dumps(json.loads(dumps(named)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
