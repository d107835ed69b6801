"""``stratagem serve``: the human play page (SPEC §7, §10), or the export of its stored games.

``stratagem serve --game dond --agent SPEC`` serves the page on 127.0.0.1 (``--host`` to expose it,
behind Starlette's ``TrustedHostMiddleware``); every finished or abandoned game goes to the SQLite
file ``--db``. ``stratagem serve --game dond --export FOLDER`` writes the finished games of that
game as a run folder instead, which ``stratagem report FOLDER`` reads like any evaluation.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from stratagem.agents.spec import LLMOptions, is_llm, make_agent
from stratagem.cli.config import load_config, parse_params
from stratagem.errors import ConfigError
from stratagem.games import get_game

console = Console()
DEFAULT_DB = "runs/serve/games.db"
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]", "::1"]


class ServeConfig(BaseModel):
    """Every ``stratagem serve`` setting (flags override a config file's)."""

    model_config = ConfigDict(extra="forbid")

    game: str = "dond"
    params: dict[str, Any] = Field(default_factory=dict, description="game parameters")
    agent: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    db: str = DEFAULT_DB
    allowed_hosts: list[str] = Field(default_factory=list)
    seat: int | None = Field(None, ge=0, le=1, description="the person's seat; None: drawn")
    export: str | None = None
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_new_tokens: int = Field(128, gt=0)
    adapter: str | None = None
    dtype: str = "auto"
    fallback: str = Field("argmax", pattern="^(argmax|sample|none)$")
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_batch: int = Field(16, gt=0)
    concurrency: int = Field(8, gt=0)
    max_retries: int = Field(2, ge=0)
    attempt_timeout: float = Field(60.0, gt=0)
    turns_per_minute: int = Field(30, gt=0)
    turns_per_minute_ip: int = Field(120, gt=0)
    games_per_hour: int = Field(30, gt=0)
    games_per_hour_ip: int = Field(120, gt=0)
    games_per_session: int = Field(200, gt=0)
    idle_minutes: float = Field(15.0, gt=0)

    def llm_options(self) -> LLMOptions:
        """Returns the backend and generation settings of an LLM agent."""
        return LLMOptions(**{k: getattr(self, k) for k in LLMOptions.__dataclass_fields__})

    def limits(self) -> Any:
        """Returns the page's rate limits and bounds."""
        from stratagem.web.app import Limits

        return Limits(
            turns_per_minute=self.turns_per_minute,
            turns_per_minute_ip=self.turns_per_minute_ip,
            games_per_hour=self.games_per_hour,
            games_per_hour_ip=self.games_per_hour_ip,
            games_per_session=self.games_per_session,
            idle_seconds=self.idle_minutes * 60.0,
        )


def serve_command(
    game: str = typer.Option(
        None, "--game", "-g", help="dond, bargaining, ipd or kuhn (default: dond)."
    ),
    param: list[str] = typer.Option(
        None, "--param", "-p", help="Game parameter KEY=VALUE (JSON value); repeatable."
    ),
    agent: str = typer.Option(
        None,
        "--agent",
        "-a",
        help="The opponent: strategy:NAME, hf, hf:MODEL_OR_PATH, openai:MODEL or vllm[:MODEL].",
    ),
    seat: int = typer.Option(
        None, help="The person's seat, 0 or 1; bargaining: 0 sells (default: drawn per game)."
    ),
    host: str = typer.Option(None, help="Address to listen on (default: 127.0.0.1)."),
    port: int = typer.Option(None, help="Port to listen on (default: 8000)."),
    db: str = typer.Option(None, help=f"SQLite file of played games (default: {DEFAULT_DB})."),
    allowed_host: list[str] = typer.Option(
        None, "--allowed-host", help="Host name people use to reach the page; repeatable."
    ),
    export: str = typer.Option(
        None, help="Write the stored finished games of --game as a run folder, then exit."
    ),
    temperature: float = typer.Option(None, help="Sampling temperature; 0 is greedy (default: 0)."),
    max_new_tokens: int = typer.Option(
        None, help="Generated tokens per model turn (default: 128)."
    ),
    adapter: str = typer.Option(None, help="PEFT adapter folder for an hf model."),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint for openai:MODEL."),
    max_retries: int = typer.Option(None, help="Retries per request for openai (default: 2)."),
    attempt_timeout: float = typer.Option(None, help="Seconds per request attempt (default: 60)."),
    turns_per_minute: int = typer.Option(
        None, help="Turns one browser session may send (default: 30)."
    ),
    games_per_hour: int = typer.Option(
        None, help="Games one browser session may start (default: 30)."
    ),
    idle_minutes: float = typer.Option(
        None, help="Minutes after which an untouched game is stored as abandoned (default: 15)."
    ),
    config: Path = typer.Option(None, "--config", "-c", help="YAML or TOML file of settings."),
) -> None:
    """Serve the page where a person plays against an agent, or export the stored games."""
    cfg = load_config(
        ServeConfig,
        config,
        game=game,
        params=parse_params(param),
        agent=agent,
        seat=seat,
        host=host,
        port=port,
        db=db,
        allowed_hosts=allowed_host or None,
        export=export,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        adapter=adapter,
        base_url=base_url,
        max_retries=max_retries,
        attempt_timeout=attempt_timeout,
        turns_per_minute=turns_per_minute,
        games_per_hour=games_per_hour,
        idle_minutes=idle_minutes,
    )
    from stratagem.web.boards import board_for

    board_for(cfg.game)  # a game the page cannot show is refused before anything loads
    if cfg.export is not None:
        export_games(cfg)
        return
    serve(cfg)


def export_games(cfg: ServeConfig) -> None:
    """Writes the finished games of ``cfg.game`` in ``cfg.db`` as a run folder."""
    from stratagem.web.storage import GameStore, export_run

    if not Path(cfg.db).is_file():
        raise ConfigError(f"--db {cfg.db}: no such games database")
    store = GameStore(cfg.db)
    try:
        n = export_run(store, cfg.game, cfg.export, agent=cfg.agent)  # type: ignore[arg-type]
    finally:
        store.close()
    from stratagem.metrics.registry import game_metrics
    from stratagem.metrics.sepo import SEPOGame

    game = get_game(cfg.game, **cfg.params)
    if game_metrics(game.name) is not None or isinstance(game, SEPOGame):
        then = f"metrics: stratagem report {cfg.export}"
    else:  # bargaining: its metrics are per tournament (stratagem.metrics.bargaining)
        then = "stratagem report has no metrics for this game; its traces are in traces.jsonl"
    console.print(
        f"exported {n} {cfg.game} games to {cfg.export}; {then}", highlight=False, markup=False
    )


def serve(cfg: ServeConfig) -> None:
    """Builds the game, the agent, the store and the app, then runs uvicorn until stopped."""
    import uvicorn

    from stratagem.web.app import PlayService, create_app
    from stratagem.web.security import session_key
    from stratagem.web.storage import GameStore

    if cfg.agent is None:
        raise ConfigError("give the opponent with --agent, e.g. --agent strategy:FairSplit")
    if not is_llm(cfg.agent):
        _refuse_llm_options(cfg)
    hosts = trusted_hosts(cfg.host, cfg.allowed_hosts)
    the_game = get_game(cfg.game, **cfg.params)
    the_agent = make_agent(cfg.agent, the_game, cfg.llm_options())
    store = GameStore(cfg.db)
    key = session_key(Path(cfg.db).with_name(Path(cfg.db).name + ".key"))
    service = PlayService(
        the_game,
        the_agent,
        cfg.agent,
        store,
        key,
        cfg.limits(),
        human_seat=cfg.seat,
        max_batch=cfg.max_batch,
    )
    app = create_app(service, allowed_hosts=hosts)
    shown = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    console.print(
        f"{cfg.game} against {the_agent.name}: http://{shown}:{cfg.port} (games stored in "
        f"{cfg.db}; Ctrl-C stops)",
        highlight=False,
        markup=False,
    )
    try:
        uvicorn.run(
            app,
            host=cfg.host,
            port=cfg.port,
            log_level="info",
            server_header=False,
            access_log=False,
        )
    finally:
        store.close()


def trusted_hosts(host: str, allowed: list[str]) -> list[str]:
    """Returns the host names the page answers to: loopback names for a loopback address, else
    ``host`` and ``allowed``; a wildcard address (0.0.0.0, ::) needs ``allowed``.

    Raises:
        ConfigError: a wildcard address without ``--allowed-host``.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None and address.is_loopback:
        return [*LOOPBACK_NAMES, *allowed]
    if address is not None and address.is_unspecified:
        if not allowed:
            raise ConfigError(
                f"--host {host} listens on every interface; name the host people will type with "
                "--allowed-host NAME (requests for other names are refused)"
            )
        return list(allowed)
    return [host, *allowed]


def _refuse_llm_options(cfg: ServeConfig) -> None:
    defaults = ServeConfig()
    given = [
        k
        for k in ("temperature", "top_p", "max_new_tokens", "adapter", "base_url", "dtype")
        if getattr(cfg, k) != getattr(defaults, k)
    ]
    if given:
        names = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ConfigError(f"{names}: for LLM agents (hf, openai:MODEL, vllm) only, not {cfg.agent}")


def main() -> None:
    """Runs ``serve`` alone (``python -m stratagem.cli.serve``) with the CLI's one-line errors."""
    import sys

    from stratagem.errors import StratagemError

    try:
        typer.run(serve_command)
    except StratagemError as exc:
        Console(stderr=True).print("error: " + " ".join(str(exc).split()), markup=False)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
