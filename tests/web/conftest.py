"""Fixtures of the play-page tests: an app around a fresh ``PlayService`` (TestClient or a live
uvicorn on 127.0.0.1), scripted models, fixed Deal or No Deal contexts, and headless Chromium.

Chromium comes from the system packages (Debian ``chromium``), driven by Playwright with
``executable_path``; nothing is downloaded. Playwright starts it with a fresh temporary profile
(its own ``--user-data-dir``) and the flags below, so it does not reach for the network. Without
it the browser tests skip, saying so (or fail, with ``STRATAGEM_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from stratagem.agent import Agent
from stratagem.agents.llm import LLMAgent
from stratagem.agents.spec import make_agent
from stratagem.backends.scripted import ScriptedBackend
from stratagem.game import Invalid
from stratagem.games import get_game
from stratagem.games.bargaining.catalog import Item
from stratagem.games.registry import GAMES
from stratagem.strategies import STRATEGY_MODULES, register_strategies
from stratagem.web.app import Limits, PlayService, create_app
from stratagem.web.storage import GameStore
from tests.test_new_game import HARE, STAG, StagHunt, strategy_module

ORIGIN = "http://testserver"
KEY = b"test-key-" + b"x" * 32
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Deal or No Deal context used by most tests: 2 books, 2 hats, 2 balls; seat 0 values
# (1, 2, 2), seat 1 values (3, 0, 2) (both sum to 10; books and balls valued by both)
CONTEXT_LINES = "2 1 2 2 2 2\n2 3 2 0 2 2\n"
# a bargaining item whose reservation values are distinctive (drawn inside [low, high])
ITEM = Item("Vintage espresso machine", "home", "Lever machine, restored.", 7000.0, 7999.99)


@pytest.fixture
def dond_contexts(tmp_path: Path) -> str:
    """A context file holding the one context above."""
    path = tmp_path / "contexts.txt"
    path.write_text(CONTEXT_LINES)
    return str(path)


def scripted(game: Any, script: Callable[[list[dict]], str] | list[str]) -> LLMAgent:
    """An LLM agent on a ``ScriptedBackend`` (its ``backend.calls`` counts model calls)."""
    return LLMAgent(ScriptedBackend(script), game, name="llm:scripted")


def last_user(chat: list[dict]) -> str:
    """The newest user turn of a chat."""
    return next(m["content"] for m in reversed(chat) if m["role"] == "user")


class Server:
    """A ``PlayService`` with its app and TestClient (sending this origin by default)."""

    def __init__(self, service: PlayService, client: TestClient):
        self.service = service
        self.client = client

    def new_game(self, client: TestClient | None = None, **body: Any) -> dict:
        """Starts a game; returns its first state once the model has moved."""
        client = client or self.client
        r = client.post("/api/games", json=body or None, headers={"Origin": ORIGIN})
        assert r.status_code == 201, r.text
        return self.settle(r.json()["game_id"], client)

    def settle(self, game_id: str, client: TestClient | None = None, timeout: float = 30) -> dict:
        """Polls the game until the model is not thinking; returns the state."""
        client = client or self.client
        deadline = time.monotonic() + timeout
        while True:
            state = client.get(f"/api/games/{game_id}").json()
            if not state["thinking"] or time.monotonic() > deadline:
                return state
            time.sleep(0.01)

    def turn(self, game_id: str, body: Any, client: TestClient | None = None, **kw: Any):
        """Posts a turn with this origin; returns the response."""
        client = client or self.client
        headers = {"Origin": ORIGIN, **kw.pop("headers", {})}
        return client.post(f"/api/games/{game_id}/turn", json=body, headers=headers, **kw)

    def human(self, game_id: str):
        """The server-side episode of ``game_id``."""
        return self.service.games[game_id]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Builds ``Server``s: ``serve(game, agent=, spec=, limits=, params=, seat=, db=)``."""
    clients: list[TestClient] = []

    def make(
        game: str = "dond",
        agent: Agent | Callable[[Any], Agent] | None = None,
        spec: str = "strategy:FairSplit",
        limits: Limits | None = None,
        params: dict | None = None,
        seat: int | None = None,
        db: str = "games.db",
        **kwargs: Any,
    ) -> Server:
        the_game = get_game(game, **(params or {}))
        if callable(agent) and not hasattr(agent, "act"):
            agent = agent(the_game)
        the_agent = agent or make_agent(spec, the_game)
        service = PlayService(
            the_game,
            the_agent,
            spec,
            GameStore(tmp_path / db),
            KEY,
            limits or Limits(),
            human_seat=seat,
            **kwargs,
        )
        client = TestClient(create_app(service), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return Server(service, client)

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def other_client(server: Server) -> TestClient:
    """A second browser: a client of the same app with its own cookie jar."""
    client = TestClient(server.client.app, raise_server_exceptions=False)
    return client


# ---- a live server and headless Chromium ----


class LiveServer:
    """uvicorn serving ``app`` on 127.0.0.1 in a thread."""

    def __init__(self, app: Any):
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stops uvicorn (running the app's shutdown)."""
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Callable[..., tuple[LiveServer, PlayService]]]:
    """Builds live servers like ``serve`` builds TestClients (keywords it does not know go to
    ``create_app``); stops them afterwards."""
    servers: list[LiveServer] = []

    def make(
        game: str = "dond",
        agent: Any = None,
        spec: str = "strategy:FairSplit",
        params: dict | None = None,
        seat: int | None = None,
        limits: Limits | None = None,
        **app_options: Any,
    ) -> tuple[LiveServer, PlayService]:
        the_game = get_game(game, **(params or {}))
        if callable(agent) and not hasattr(agent, "act"):
            agent = agent(the_game)
        the_agent = agent or make_agent(spec, the_game)
        service = PlayService(
            the_game,
            the_agent,
            spec,
            GameStore(tmp_path / f"live-{len(servers)}.db"),
            KEY,
            limits or Limits(),
            human_seat=seat,
        )
        server = LiveServer(create_app(service, **app_options))
        servers.append(server)
        return server, service

    yield make
    for server in servers:
        server.stop()


def chromium_path() -> str | None:
    """The system Chromium (``$STRATAGEM_CHROMIUM``, /usr/bin/chromium, or on the PATH)."""
    for candidate in (
        os.environ.get("STRATAGEM_CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless system Chromium through Playwright (a fresh profile per launch), or a skip."""
    # CI sets STRATAGEM_REQUIRE_BROWSER=1 (make test): a missing browser fails instead of skipping
    missing = pytest.fail if os.environ.get("STRATAGEM_REQUIRE_BROWSER") == "1" else pytest.skip
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install -e '.[dev]')")
    path = chromium_path()
    if path is None:
        missing("no Chromium at /usr/bin/chromium: apt-get install -y chromium (make test does)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go (the pytest temporary folder, kept after the run)."""
    return tmp_path_factory.mktemp("screenshots", numbered=False)


# ---- toy games registered by a test: served by the generic text board ----


class WordHunt(StagHunt):
    """The stag hunt with free-form answers: no legal tokens, the last word is the choice."""

    name = "wordhunt"
    rules = "Stag hunt, 4 rounds. Answer in words; end with STAG or HARE."

    def legal(self, deal: None, seat: int) -> tuple[str, ...]:
        return ()

    def parse(self, text: str, legal: tuple[str, ...]) -> str | Invalid | None:
        words = text.replace(".", " ").split()
        last = words[-1].upper() if words else ""
        return last if last in (STAG, HARE) else Invalid("end your answer with STAG or HARE")

    def answer_text(self, action: str) -> str:
        return f"I will hunt the {action.lower()}.\n{action}"


TOYS = (StagHunt, WordHunt)


@pytest.fixture
def toys() -> Iterator[None]:
    """Registers the toy games and their strategies for one test."""
    for toy in TOYS:
        GAMES.register(toy)
        register_strategies(toy.name, strategy_module())
    yield
    for toy in TOYS:
        GAMES.unregister(toy.name)
        STRATEGY_MODULES.unregister(toy.name)
