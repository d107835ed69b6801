"""``stratagem serve``: the human play page (SPEC §7, §10), or the export of its stored games.

``stratagem serve --game dond --agent SPEC`` serves the page on 127.0.0.1 (``--host`` to expose it,
behind Starlette's ``TrustedHostMiddleware``); every finished or abandoned game goes to the SQLite
file ``--db``. ``stratagem serve --game dond --export FOLDER`` writes the games of that game and
one configuration as a run folder instead, which ``stratagem report FOLDER`` reads like any
evaluation.
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
    """Writes the games of one configuration of ``cfg.game`` in ``cfg.db`` as a run folder."""
    from stratagem.web.study import export_games as export

    console.print(export(cfg), highlight=False, markup=False)


def serve(cfg: ServeSettings) -> None:
    """Builds the game, the agent, the store and the app, then runs uvicorn until stopped."""
    import uvicorn

    from stratagem.agents.spec import is_llm, make_agent
    from stratagem.games import get_game
    from stratagem.web.app import PlayService, create_app
    from stratagem.web.security import session_key
    from stratagem.web.storage import GameStore
    from stratagem.web.study import open_study

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
    study, note = open_study(cfg, store, the_game, the_agent)
    service = PlayService(
        the_game,
        the_agent,
        cfg.agent,
        store,
        key,
        cfg.limits(),
        human_seat=cfg.seat,
        max_batch=cfg.max_batch,
        study=study,
    )
    app = create_app(service, allowed_hosts=site.hosts, trusted_proxies=site.proxies)
    console.print(
        f"{cfg.game} against {the_agent.name}: {site.url} (games stored in {cfg.db}; Ctrl-C stops)",
        highlight=False,
        markup=False,
    )
    console.print(note, highlight=False, markup=False)
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
