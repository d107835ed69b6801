"""The play page: a FastAPI app where a person plays one seat and an agent the other (SPEC §7).

``PlayService`` holds every piece of server-side state — sessions, live episodes, rate limits,
the model worker and the games database — in one object the app is built around (no module-level
per-game or per-user state, RELIABILITY I1). ``create_app`` wires it to HTTP:

======================================  ======================================================
``GET /``                               the page (plain HTML, one script per game, no build)
``GET /api/session``                    the game, the agent's name and the session's live game
``POST /api/games``                     a new game for this session (``{"seat": 0|1}`` optional)
``GET /api/games/{id}``                 the person's view of the game (the page polls it)
``POST /api/games/{id}/turn``           the person's turn (the board's JSON body)
``POST /api/games/{id}/retry``          ask the model again after a backend failure
``POST /api/games/{id}/leave``          abandon the game (stored as abandoned)
======================================  ======================================================

Errors are one-line JSON ``{"detail": ...}``: 403 for another session's game or a cross-site
request, 404 for an unknown game, 409 for a move while another is handled or while the model
plays, 422 for refused input (the game unchanged), 429 with ``Retry-After`` past a rate limit, and
a generic 500 that never carries a traceback (I9). Every response carries a strict CSP
(``default-src 'self'``, no inline script) and the usual hardening headers (I5).
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stratagem.agent import Agent
from stratagem.game import Game
from stratagem.web.boards import Board, InputError, board_for
from stratagem.web.episodes import Busy, HumanEpisode, ModelWorker
from stratagem.web.security import COOKIE, RateLimiter, new_id, same_origin, sign, unsign
from stratagem.web.storage import GameRecord, GameStore, Status, now_iso

log = logging.getLogger("stratagem.web")
STATIC = Path(str(resources.files("stratagem.web") / "static"))
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "same-origin"),
    ("cross-origin-opener-policy", "same-origin"),
    ("permissions-policy", "camera=(), microphone=(), geolocation=()"),
)


@dataclass(frozen=True)
class Limits:
    """Rate limits and bounds of the play page (RELIABILITY I4, I7)."""

    turns_per_minute: int = 30  # turns and retries of one session
    turns_per_minute_ip: int = 120  # of one IP address, all its sessions together
    games_per_hour: int = 30  # new games of one session
    games_per_hour_ip: int = 120
    reads_per_minute_ip: int = 1200  # state polls of one IP address
    games_per_session: int = 200
    idle_seconds: float = 900.0  # a live game untouched this long is stored as abandoned
    max_body_bytes: int = 16_384
    cookie_seconds: int = 7 * 24 * 3600


class Forbidden(PermissionError):
    """HTTP 403: another session's game, or a cross-site request."""


class NotFound(LookupError):
    """HTTP 404: no such game (never created, or forgotten after it was stored)."""


class Limited(RuntimeError):
    """HTTP 429: a rate limit; ``retry_after`` in whole seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Session:
    """One browser's games (its cookie names it)."""

    id: str
    games: list[str] = field(default_factory=list)
    live: str | None = None  # the game in play, if any
    touched: float = field(default_factory=time.monotonic)


class PlayService:
    """All server-side state of the play page: sessions, live games, limits, the model worker,
    the games database."""

    def __init__(
        self,
        game: Game,
        agent: Agent,
        agent_spec: str,
        store: GameStore,
        key: bytes,
        limits: Limits | None = None,
        *,
        human_seat: int | None = None,
        max_batch: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ):
        """Serves ``game`` with ``agent`` in the seat the person does not take.

        Args:
            game: the game played.
            agent: the opponent.
            agent_spec: the spec ``agent`` was built from (stored with every game).
            store: where finished and abandoned games go.
            key: signs session cookies.
            limits: rate limits and bounds (the defaults of ``Limits`` when None).
            human_seat: the person's seat when a request names none (None: drawn per game).
            max_batch: the most games one model call serves.
            clock: monotonic seconds, for idle times and rate limits (tests pass a fake one).
        """
        self.game = game
        self.board: Board = board_for(game.name)
        self.agent = agent
        self.agent_spec = agent_spec
        self.store = store
        self.key = key
        self.limits = limits or Limits()
        self.human_seat = human_seat
        self.clock = clock
        self.limiter = RateLimiter(clock)
        self.sessions: dict[str, Session] = {}
        self.games: dict[str, HumanEpisode] = {}
        self._lock = threading.Lock()  # guards ``sessions`` and ``games``
        self.worker = ModelWorker(agent, self.after_change, max_batch=max_batch)

    def session(self, cookie: str | None) -> Session | None:
        """Returns the session a cookie names, or None (no cookie, a tampered one, or a session
        this server does not know)."""
        session_id = unsign(self.key, cookie)
        with self._lock:
            session = self.sessions.get(session_id) if session_id else None
            if session is not None:
                session.touched = self.clock()
            return session

    def new_game(self, session: Session | None, ip: str, seat: int | None) -> HumanEpisode:
        """Starts a game for ``session`` (a new session when None); a live game of the session
        is stored as abandoned first.

        Raises:
            Limited: the session or IP started too many games lately, or the session reached
                ``games_per_session``.
        """
        limits = self.limits
        if session is not None:
            if len(session.games) >= limits.games_per_session:
                raise Limited(f"this session has played {limits.games_per_session} games", 3600)
            self.check_limit(f"games:{session.id}", limits.games_per_hour, 3600.0)
        self.check_limit(f"games-ip:{ip}", limits.games_per_hour_ip, 3600.0)
        with self._lock:
            if session is None:
                session = Session(new_id(), touched=self.clock())
                self.sessions[session.id] = session
                self.limiter.hit(f"games:{session.id}", limits.games_per_hour, 3600.0)
            previous = self.games.get(session.live) if session.live else None
        if previous is not None:
            self.close(previous, "abandoned")
        human = HumanEpisode(
            game_id=new_id(),
            session_id=session.id,
            game=self.game,
            board=self.board,
            agent=self.agent,
            agent_spec=self.agent_spec,
            human_seat=self._seat(seat),
            seed=secrets.randbits(32),
            touched=self.clock(),
        )
        with self._lock:
            self.games[human.game_id] = human
            session.games.append(human.game_id)
            session.live = human.game_id
        with human.lock:
            ask = human.advance()
        if ask:
            self.worker.request(human)
        return human

    def _seat(self, seat: int | None) -> int:
        if seat is not None:
            return seat
        return secrets.randbelow(2) if self.human_seat is None else self.human_seat

    def game_of(self, session: Session | None, game_id: str) -> HumanEpisode:
        """Returns the game ``game_id`` of ``session``.

        Raises:
            NotFound: no such game.
            Forbidden: the game belongs to another session (or the request has none).
        """
        with self._lock:
            human = self.games.get(game_id)
        if human is None:
            raise NotFound("no such game")
        if session is None or human.session_id != session.id:
            raise Forbidden("this game belongs to another session")
        human.touched = self.clock()
        return human

    def check_limit(self, key: str, limit: int, window: float) -> None:
        """Counts one hit of ``key``; raises ``Limited`` past ``limit`` per ``window``."""
        wait = self.limiter.hit(key, limit, window)
        if wait is not None:
            raise Limited("too many requests; wait a little", wait)

    def turn(self, session: Session, human: HumanEpisode, ip: str, payload: Any) -> None:
        """Submits the person's turn (rate-limited per session and IP) and asks the model when
        it is its turn."""
        self.check_limit(f"turns:{session.id}", self.limits.turns_per_minute, 60.0)
        self.check_limit(f"turns-ip:{ip}", self.limits.turns_per_minute_ip, 60.0)
        if human.submit(payload):
            self.worker.request(human)
        self.after_change(human)

    def retry(self, session: Session, human: HumanEpisode, ip: str) -> None:
        """Asks the model again after a backend failure (rate-limited like a turn)."""
        self.check_limit(f"turns:{session.id}", self.limits.turns_per_minute, 60.0)
        self.check_limit(f"turns-ip:{ip}", self.limits.turns_per_minute_ip, 60.0)
        if human.retry():
            self.worker.request(human)

    def after_change(self, human: HumanEpisode) -> None:
        """Stores a game that just finished (once). A failed write is logged, not raised: the
        person's move stands, and the reaper writes the game again once it is idle."""
        if human.done and not human.closed:
            with contextlib.suppress(Exception):
                self.close(human, _ending(human))

    def close(self, human: HumanEpisode, status: Status) -> bool:
        """Stores ``human`` as ``finished`` or ``abandoned`` (a live game is ended first) and
        frees its session's live slot; returns False when it was stored already."""
        with human.lock:
            if human.closed:
                return False
            if status == "abandoned":
                human.abandon()
            record = self._record(human, status)
            try:
                self.store.save(record)
            except Exception:
                log.exception("game %s could not be stored", human.game_id[:8])
                raise
            human.closed = True
            human.version += 1
        with self._lock:
            session = self.sessions.get(human.session_id)
            if session is not None and session.live == human.game_id:
                session.live = None
        return True

    def _record(self, human: HumanEpisode, status: Status) -> GameRecord:
        episode = human.episode
        trace = episode.trace()
        h, m = human.human_seat, human.model_seat
        totals = trace.totals() if status == "finished" else None
        return GameRecord(
            game_id=human.game_id,
            game=self.game.name,
            game_version=self.game.version,
            game_params=dict(self.game.params),
            status=status,
            agent_spec=self.agent_spec,
            agent_name=self.agent.name,
            human_seat=h,
            human_score=totals[h] if totals else None,
            model_score=totals[m] if totals else None,
            started=now_iso(human.started),
            ended=now_iso(),
            human_view={"system": human.rules.get(h), "screen": human.screen()},
            model_view={
                "system": human.rules.get(m),
                "chat": [message.to_dict() for message in episode.chat(m)],
            },
            trace=trace,
        )

    def reap(self, now: float | None = None) -> int:
        """Stores live games idle for ``idle_seconds`` as abandoned, forgets stored games and
        empty sessions idle as long, and prunes rate-limit counters; returns the games
        abandoned."""
        now = self.clock() if now is None else now
        idle = self.limits.idle_seconds
        with self._lock:
            stale = [h for h in self.games.values() if now - h.touched > idle]
        abandoned = 0
        for human in stale:
            if human.closed:
                continue
            ending = _ending(human)
            if self.close(human, ending) and ending == "abandoned":
                abandoned += 1
        with self._lock:
            for human in stale:
                if human.closed:
                    self.games.pop(human.game_id, None)
            for sid in [
                s.id for s in self.sessions.values() if s.live is None and now - s.touched > idle
            ]:
                del self.sessions[sid]
        self.limiter.prune(3600.0)
        return abandoned

    def shutdown(self) -> None:
        """Stores every live game as abandoned and stops the model worker."""
        with self._lock:
            live = [h for h in self.games.values() if not h.closed]
        for human in live:
            with contextlib.suppress(Exception):
                self.close(human, _ending(human))
        self.worker.stop()


def _ending(human: HumanEpisode) -> Status:
    """How a game that is being closed ends: ``finished`` if it reached its end by the rules
    (its storing failed earlier and is retried), else ``abandoned``."""
    return "finished" if human.done and human.episode.error is None else "abandoned"


def create_app(service: PlayService, allowed_hosts: list[str] | None = None) -> FastAPI:
    """Returns the FastAPI app of the play page around ``service``; with ``allowed_hosts``,
    requests naming another host are refused (Starlette's ``TrustedHostMiddleware``)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = threading.Event()
        period = max(1.0, min(60.0, service.limits.idle_seconds / 4))

        def reaper() -> None:
            while not stop.wait(period):
                try:
                    service.reap()
                except Exception:
                    log.exception("reaping idle games failed")

        thread = threading.Thread(target=reaper, name="stratagem-reaper", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            service.shutdown()

    app = FastAPI(
        title="stratagem",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    app.state.service = service
    _routes(app, service)
    _errors(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)
    app.add_middleware(SecurityHeaders)
    return app


def _ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _check_origin(request: Request) -> None:
    """Refuses (403) a state-changing request that does not come from the page's own origin."""
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if not same_origin(request.headers.get("origin"), request.headers.get("referer"), own):
        raise Forbidden("cross-site request refused")


def _state(human: HumanEpisode, status: int = 200) -> JSONResponse:
    return JSONResponse(human.snapshot(), status_code=status)


def _routes(app: FastAPI, service: PlayService) -> None:
    limits = service.limits

    def session(request: Request) -> Session | None:
        return service.session(request.cookies.get(COOKIE))

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/api/session")
    def get_session(request: Request) -> dict[str, Any]:
        service.check_limit(f"reads-ip:{_ip(request)}", limits.reads_per_minute_ip, 60.0)
        current = session(request)
        return {
            "game": service.game.name,
            "agent": service.agent.name,
            "live": current.live if current is not None else None,
        }

    @app.post("/api/games")
    async def new_game(request: Request) -> JSONResponse:
        _check_origin(request)
        seat = _seat(await _body(request, limits.max_body_bytes, allow_empty=True))
        current = session(request)
        human = await run_in_threadpool(service.new_game, current, _ip(request), seat)
        response = await run_in_threadpool(_state, human, 201)
        if current is None:
            response.set_cookie(
                COOKIE,
                sign(service.key, human.session_id),
                max_age=limits.cookie_seconds,
                path="/",
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
            )
        return response

    _game_routes(app, service, session)


def _game_routes(
    app: FastAPI, service: PlayService, session: Callable[[Request], Session | None]
) -> None:
    limits = service.limits

    @app.get("/api/games/{game_id}")
    def get_game(game_id: str, request: Request) -> JSONResponse:
        service.check_limit(f"reads-ip:{_ip(request)}", limits.reads_per_minute_ip, 60.0)
        return _state(service.game_of(session(request), game_id))

    @app.post("/api/games/{game_id}/turn")
    async def turn(game_id: str, request: Request) -> JSONResponse:
        _check_origin(request)
        current = session(request)
        human = service.game_of(current, game_id)
        payload = await _body(request, limits.max_body_bytes)
        await run_in_threadpool(service.turn, current, human, _ip(request), payload)
        return await run_in_threadpool(_state, human)

    @app.post("/api/games/{game_id}/retry")
    def retry(game_id: str, request: Request) -> JSONResponse:
        _check_origin(request)
        current = session(request)
        human = service.game_of(current, game_id)
        service.retry(current, human, _ip(request))  # type: ignore[arg-type]
        return _state(human)

    @app.post("/api/games/{game_id}/leave")
    def leave(game_id: str, request: Request) -> JSONResponse:
        _check_origin(request)
        human = service.game_of(session(request), game_id)
        service.close(human, "abandoned")
        return _state(human)


def _seat(body: Any) -> int | None:
    if body == {} or body is None:
        return None
    if not isinstance(body, dict) or set(body) != {"seat"}:
        raise InputError('a new game takes {} or {"seat": 0 or 1}')
    seat = body["seat"]
    if seat is not None and (type(seat) is not int or seat not in (0, 1)):
        raise InputError("seat: 0, 1 or null")
    return seat


async def _body(request: Request, limit: int, allow_empty: bool = False) -> Any:
    """Returns the request's JSON body, read up to ``limit`` bytes; raises ``InputError`` for a
    larger body, another content type, or text that is not JSON."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise InputError(f"the request body is larger than {limit} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise InputError(f"the request body is larger than {limit} bytes")
    if not data and allow_empty:
        return {}
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise InputError("send the body as application/json")
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise InputError("the body is not valid JSON") from None


def _errors(app: FastAPI) -> None:
    def detail(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"detail": message}, status_code=status, headers=headers)

    @app.exception_handler(InputError)
    async def refused(request: Request, exc: InputError) -> JSONResponse:
        return detail(422, str(exc))

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy) -> JSONResponse:
        return detail(409, str(exc))

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden) -> JSONResponse:
        return detail(403, str(exc))

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> JSONResponse:
        return detail(404, str(exc))

    @app.exception_handler(Limited)
    async def limited(request: Request, exc: Limited) -> JSONResponse:
        return detail(429, str(exc), {"Retry-After": str(exc.retry_after)})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return detail(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error on %s %s: %r", request.method, request.url.path, exc)
        return detail(500, "internal error")


class SecurityHeaders:
    """ASGI middleware: the CSP and hardening headers on every response, ``no-store`` on the
    API's."""

    def __init__(self, app: ASGIApp):
        """Wraps ``app``."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Adds the headers to the response start of an HTTP request."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = scope["path"].startswith("/api/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers[name] = value
                if api:
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)
