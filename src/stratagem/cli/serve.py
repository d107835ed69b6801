"""``stratagem serve``: the human play page (SPEC §7, §10), or the export of its stored games.

``stratagem serve --game dond --agent SPEC`` serves the page on 127.0.0.1 (``--host`` to expose it,
behind Starlette's ``TrustedHostMiddleware``); every finished or abandoned game goes to the SQLite
file ``--db``. ``stratagem serve --game dond --export FOLDER`` writes the games of that game and
one configuration as a run folder instead, which ``stratagem report FOLDER`` reads like any
evaluation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from stratagem.errors import ConfigError
from stratagem.web.settings import ServeSettings

if TYPE_CHECKING:
    from stratagem.agent import Agent
    from stratagem.game import Game
    from stratagem.web.security import Deployment
    from stratagem.web.storage import GameStore
    from stratagem.web.study import Study

console = Console()


def serve_command(cfg: ServeSettings) -> None:
    """Serve the page where a person plays against an agent, or export the stored games."""
    from stratagem.web.boards import board_for

    board_for(cfg.game)  # a game the page cannot show is refused before anything loads
    if cfg.export is not None:
        export_games(cfg)
        return
    if cfg.issue is not None:
        issue_links(cfg)
        return
    serve(cfg)


def issue_links(cfg: ServeSettings) -> None:
    """Prints a CSV of the participant ids ``--issue`` names with their codes and links, signed
    with the session key of ``--db`` (created beside it when missing)."""
    import sys

    from stratagem.web.issued import issue_ids, issued_links
    from stratagem.web.security import deployment, session_key

    ids = issue_ids(cfg.issue or "")
    site = deployment(cfg.host, cfg.port, cfg.allowed_hosts, cfg.trusted_proxies)
    db = Path(cfg.db)
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--db {cfg.db}: cannot create its folder ({exc.strerror})") from None
    key = session_key(db.with_name(db.name + ".key"))
    sys.stdout.write(issued_links(key, ids, site.url) + "\n")
    if not cfg.issued_ids:
        sys.stderr.write("serve with --issued-ids so that only these links are accepted\n")


def export_games(cfg: ServeSettings) -> None:
    """Writes the games of one configuration of ``cfg.game`` in ``cfg.db`` as a run folder."""
    from stratagem.web.study import export_games as export

    console.print(export(cfg), highlight=False, markup=False)


def serve(cfg: ServeSettings) -> None:
    """Builds the game, the agent, the store and the app, then runs uvicorn until stopped."""
    from stratagem.agents.spec import make_agent
    from stratagem.games import get_game
    from stratagem.web.security import session_key
    from stratagem.web.storage import GameStore
    from stratagem.web.study import open_study

    spec = _agent_spec(cfg)
    from stratagem.web.security import deployment

    site = deployment(cfg.host, cfg.port, cfg.allowed_hosts, cfg.trusted_proxies)
    the_game = get_game(cfg.game, **cfg.params)
    the_agent = make_agent(spec, the_game, cfg.llm_options(the_game))
    store = GameStore(cfg.db)
    key = session_key(Path(cfg.db).with_name(Path(cfg.db).name + ".key"))
    study, note = open_study(cfg, store, the_game, the_agent)
    app = _create_app(cfg, site, spec, the_game, the_agent, store, key, study)
    console.print(
        f"{cfg.game} against {the_agent.name}: {site.url} (games stored in {cfg.db}; Ctrl-C stops)",
        highlight=False,
        markup=False,
    )
    console.print(note, highlight=False, markup=False)
    _run_until_stopped(cfg, app, store)


def _agent_spec(cfg: ServeSettings) -> str:
    """The opponent's ``--agent`` spec; refuses none, and LLM settings for an agent that is not an
    LLM."""
    from stratagem.agents.spec import is_llm

    if cfg.agent is None:
        raise ConfigError("give the opponent with --agent, e.g. --agent strategy:FairSplit")
    if not is_llm(cfg.agent) and cfg.llm_settings_given():
        names = ", ".join(cfg.llm_settings_given())
        raise ConfigError(f"{names}: for LLM agents (hf, openai:MODEL, vllm) only, not {cfg.agent}")
    return cfg.agent


def _create_app(
    cfg: ServeSettings,
    site: Deployment,
    spec: str,
    game: Game,
    agent: Agent,
    store: GameStore,
    key: bytes,
    study: Study,
) -> Any:
    """The play page's app: a ``PlayService`` of ``agent`` against a person, behind the
    deployment's allowed hosts and trusted proxies."""
    from stratagem.web.app import PlayService, create_app

    service = PlayService(
        game,
        agent,
        spec,
        store,
        key,
        cfg.limits(),
        human_seat=cfg.seat,
        max_batch=cfg.max_batch,
        study=study,
    )
    return create_app(service, allowed_hosts=site.hosts, trusted_proxies=site.proxies)


def _run_until_stopped(cfg: ServeSettings, app: Any, store: GameStore) -> None:
    """Runs uvicorn on ``cfg.host``:``cfg.port`` until stopped, then closes the store."""
    import uvicorn

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
