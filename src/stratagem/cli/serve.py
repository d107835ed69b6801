"""``stratagem serve``: the human play page (SPEC §7, §10), or the export of its stored games.

``stratagem serve --game dond --agent SPEC`` serves the page on 127.0.0.1 (``--host`` to expose it,
behind Starlette's ``TrustedHostMiddleware``); every finished or abandoned game goes to the SQLite
file ``--db``. ``stratagem serve --game dond --export FOLDER`` writes the finished games of that
game as a run folder instead, which ``stratagem report FOLDER`` reads like any evaluation.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from stratagem.errors import ConfigError
from stratagem.web.settings import ServeSettings

console = Console()


def serve_command(cfg: ServeSettings) -> None:
    """Serve the page where a person plays against an agent, or export the stored games."""
    from stratagem.web.boards import board_for

    board_for(cfg.game)  # a game the page cannot show is refused before anything loads
    if cfg.export is not None:
        export_games(cfg)
        return
    serve(cfg)


def export_games(cfg: ServeSettings) -> None:
    """Writes the finished games of ``cfg.game`` in ``cfg.db`` as a run folder."""
    from stratagem.web.storage import GameStore, export_run

    if not Path(cfg.db).is_file():
        raise ConfigError(f"--db {cfg.db}: no such games database")
    store = GameStore(cfg.db)
    try:
        n = export_run(store, cfg.game, cfg.export, agent=cfg.agent)  # type: ignore[arg-type]
    finally:
        store.close()
    from stratagem.games import get_game
    from stratagem.metrics.registry import game_metrics
    from stratagem.metrics.sepo import SEPOGame

    game = get_game(cfg.game, **cfg.params)
    if isinstance(game, SEPOGame) or game_metrics(game.name) is not None:
        then = f"metrics: stratagem report {cfg.export}"
    else:  # bargaining: its metrics are per tournament (stratagem.metrics.bargaining)
        then = "stratagem report has no metrics for this game; its traces are in traces.jsonl"
    console.print(
        f"exported {n} {cfg.game} games to {cfg.export}; {then}", highlight=False, markup=False
    )


def serve(cfg: ServeSettings) -> None:
    """Builds the game, the agent, the store and the app, then runs uvicorn until stopped."""
    import uvicorn

    from stratagem.agents.spec import is_llm, make_agent
    from stratagem.games import get_game
    from stratagem.web.app import PlayService, create_app
    from stratagem.web.security import session_key
    from stratagem.web.storage import GameStore

    if cfg.agent is None:
        raise ConfigError("give the opponent with --agent, e.g. --agent strategy:FairSplit")
    if not is_llm(cfg.agent) and cfg.llm_settings_given():
        names = ", ".join(cfg.llm_settings_given())
        raise ConfigError(f"{names}: for LLM agents (hf, openai:MODEL, vllm) only, not {cfg.agent}")
    from stratagem.web.security import deployment

    site = deployment(cfg.host, cfg.port, cfg.allowed_hosts, cfg.trusted_proxies)
    the_game = get_game(cfg.game, **cfg.params)
    the_agent = make_agent(cfg.agent, the_game, cfg.llm_options(the_game))
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
    app = create_app(service, allowed_hosts=site.hosts, trusted_proxies=site.proxies)
    console.print(
        f"{cfg.game} against {the_agent.name}: {site.url} (games stored in {cfg.db}; Ctrl-C stops)",
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
            proxy_headers=False,  # ForwardedHeaders believes only --trusted-proxy
        )
    finally:
        store.close()
