"""The play page's settings (``stratagem serve``): the game and opponent, where it listens,
where games are stored, and the rate limits (a settings dataclass: see ``stratagem.settings``)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from pydantic import Field

from stratagem.agents.settings import LLMSettings
from stratagem.settings import Positive, opt

DEFAULT_DB = "runs/serve/games.db"


@dataclasses.dataclass(kw_only=True)
class GameChoice:
    """The game the page serves."""

    game: str = opt("dond", "-g")
    """Game id: any text game (see `stratagem games`)."""
    params: dict[str, Any] = opt({}, "--param", "-p")
    """Game parameter KEY=VALUE (JSON value); repeatable."""


@dataclasses.dataclass(kw_only=True)
class ServeSettings(LLMSettings, GameChoice):
    """Serve the play page, or export its stored games.

    A web page where a person plays a game against an agent; every finished game is stored."""

    agent: str | None = opt(None, "-a")
    """The opponent: strategy:NAME, hf, hf:MODEL_OR_PATH, openai:MODEL or vllm[:MODEL]."""
    seat: Annotated[int, Field(ge=0, le=1)] | None = None
    """The person's seat, 0 or 1; bargaining: 0 sells [drawn per game]."""
    host: str = "127.0.0.1"
    """Address to listen on."""
    port: Annotated[int, Field(ge=0, le=65535)] = 8000
    """Port to listen on."""
    db: str = DEFAULT_DB
    """SQLite file of played games (one server per file; every row names its configuration)."""
    allowed_hosts: list[str] = opt([], "--allowed-host")
    """Host names people use to reach the page."""
    trusted_proxies: list[str] = opt([], "--trusted-proxy")
    """Address or network of a reverse proxy whose X-Forwarded-Proto/-Host/-For are believed;
    repeatable [none: the headers are ignored]."""
    model_timeout: Annotated[float, Field(gt=0)] = 120.0
    """Seconds the model may take for one turn, any backend; then the page offers a retry."""
    export: str | None = None
    """Write the stored finished games of --game as a run folder, then exit."""
    turns_per_minute: Positive = 30
    """Turns one browser session may send per minute."""
    turns_per_minute_ip: Positive = 120
    """Turns one address may send per minute."""
    games_per_hour: Positive = 30
    """Games one browser session may start per hour."""
    games_per_hour_ip: Positive = 120
    """Games one address may start per hour."""
    games_per_session: Positive = 200
    """Games one browser session may play in all."""
    idle_minutes: Annotated[float, Field(gt=0)] = 15.0
    """Minutes after which an untouched game is stored as abandoned."""
    # the study: consent, participants, exporting one configuration
    consent: str | None = None
    """Text file of consent and instructions a person must accept before their first game."""
    participant_id: bool = False
    """Ask each person for a participant id (the page's ?pid=ID, or a short form) first."""
    issued_ids: bool = False
    """Accept only participant ids issued with --issue (links ?pid=ID.CODE): knowing someone's id
    is then not enough to see or extend their record; implies --participant-id."""
    issue: str | None = None
    """Print the links of the participant ids N (P001 to PN) or FIRST-LAST (P051-P100) as CSV,
    for --issued-ids, then exit (codes are signed with the session key beside --db)."""
    export_config: str | None = None
    """With --export: the configuration id (or its start) to export when --db holds several."""

    def limits(self) -> Any:
        """Returns the page's rate limits and bounds."""
        from stratagem.web.service import Limits

        return Limits(
            turns_per_minute=self.turns_per_minute,
            turns_per_minute_ip=self.turns_per_minute_ip,
            games_per_hour=self.games_per_hour,
            games_per_hour_ip=self.games_per_hour_ip,
            games_per_session=self.games_per_session,
            idle_seconds=self.idle_minutes * 60.0,
            model_timeout=self.model_timeout,
        )
