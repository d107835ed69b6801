"""The play page's HTTP side: a FastAPI app where a person plays one seat and an agent the other
(SPEC §7).

``create_app`` wires one ``PlayService`` (``service.py``: every piece of server-side state, no
module-level per-game or per-user state, RELIABILITY I1) to HTTP:

======================================  ======================================================
``GET /``                               the page (plain HTML, one script per board, no build)
``GET /api/session``                    the game, its board's script, the agent's name and
                                        the session's game (in play, or the last one ended)
``POST /api/games``                     a new game for this session (``{"seat": 0|1}`` optional)
``GET /api/games/{id}``                 the person's view of the game (the page polls it)
``POST /api/games/{id}/turn``           the person's turn (the board's JSON body)
``POST /api/games/{id}/retry``          ask the model again after a backend failure
``POST /api/games/{id}/leave``          abandon the game (stored as abandoned)
``GET /api/study``                      the study: consent text, participant, games, total
``POST /api/study``                     give the participant id and/or accept the terms
                                        (another id: a new session, ``"leave": true``
                                        abandons the previous participant's game in play)
``GET /operator``                       the operator's summary page (with its token only)
``GET /api/operator``                   the same summary as JSON
======================================  ======================================================

Errors are one-line JSON ``{"detail": ...}``: 400 for a session cookie that is not ASCII (cleared),
403 for another session's game, a cross-site request, a game started before the study's terms are
accepted, or the operator's summary without its token; 404 for a game the server does not hold
(``"gone": true`` and its stored ``status``, so a page left open over it says so), 409 for a move
while another is handled or while the model plays, 422 for refused input (the game unchanged), 429
with ``Retry-After`` past a rate limit, and a generic 500 that never carries a traceback (I9).
Every response, an error too, carries a strict CSP (``default-src 'self'``, no inline script) and
the usual hardening headers (I5).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from stratagem.web.boards import InputError
from stratagem.web.episodes import Busy, HumanEpisode
from stratagem.web.errors import Forbidden, Limited, NotFound
from stratagem.web.security import (
    COOKIE,
    ForwardedHeaders,
    MalformedCookie,
    SecurityHeaders,
    public_name,
    same_origin,
    sign,
)
from stratagem.web.service import Limits, PlayService, Session
from stratagem.web.study import summary_page

__all__ = ["Limits", "PlayService", "create_app"]

log = logging.getLogger("stratagem.web")
STATIC = Path(str(resources.files("stratagem.web") / "static"))


def create_app(
    service: PlayService,
    allowed_hosts: list[str] | None = None,
    trusted_proxies: Sequence[str] = (),
) -> FastAPI:
    """Returns the FastAPI app of the play page around ``service``; with ``allowed_hosts``,
    requests naming another host are refused (Starlette's ``TrustedHostMiddleware``); requests
    from ``trusted_proxies`` (networks, as ``security.proxy_networks`` returns them) take their
    scheme, host and client address from the ``X-Forwarded-*`` headers (``ForwardedHeaders``)."""

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
    app.add_middleware(ForwardedHeaders, networks=tuple(trusted_proxies))  # outermost: first
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
        current = session(request)
        service.check_read(current, _ip(request))
        return {
            "game": service.game.name,
            "board": service.board.kind,
            "agent": public_name(service.agent.name),
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
            _set_cookie(response, request, service, human.session_id)
        return response

    _game_routes(app, service, session)
    _study_routes(app, service, session)


def _set_cookie(response: Response, request: Request, service: PlayService, sid: str) -> None:
    """Gives the browser the signed cookie of its new session ``sid``."""
    response.set_cookie(
        COOKIE,
        sign(service.key, sid),
        max_age=service.limits.cookie_seconds,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _game_routes(
    app: FastAPI, service: PlayService, session: Callable[[Request], Session | None]
) -> None:
    limits = service.limits

    def owned(request: Request, game_id: str) -> tuple[Session, HumanEpisode]:
        """The request's session and its game ``game_id`` (404 or 403 otherwise)."""
        current = session(request)
        human = service.game_of(current, game_id)
        if current is None:  # game_of has refused it already; this tells the type checker
            raise Forbidden("this game belongs to another session")
        return current, human

    @app.get("/api/games/{game_id}")
    def get_game(game_id: str, request: Request) -> JSONResponse:
        current = session(request)
        service.check_read(current, _ip(request))
        return _state(service.game_of(current, game_id))

    @app.post("/api/games/{game_id}/turn")
    async def turn(game_id: str, request: Request) -> JSONResponse:
        _check_origin(request)
        current, human = owned(request, game_id)
        payload = await _body(request, limits.max_body_bytes)
        await run_in_threadpool(service.turn, current, human, _ip(request), payload)
        return await run_in_threadpool(_state, human)

    @app.post("/api/games/{game_id}/retry")
    def retry(game_id: str, request: Request) -> JSONResponse:
        _check_origin(request)
        current, human = owned(request, game_id)
        service.retry(current, human, _ip(request))
        return _state(human)

    @app.post("/api/games/{game_id}/leave")
    def leave(game_id: str, request: Request) -> JSONResponse:
        _check_origin(request)
        human = service.game_of(session(request), game_id)
        service.close(human, "abandoned")
        return _state(human)


def _study_routes(
    app: FastAPI, service: PlayService, session: Callable[[Request], Session | None]
) -> None:
    """The study's routes: the participant's state, joining, and the operator's summary."""
    limits = service.limits

    @app.get("/api/study")
    def get_study(request: Request) -> dict[str, Any]:
        service.check_limit(f"reads-ip:{_ip(request)}", limits.reads_per_minute_ip, 60.0)
        return service.study_state(session(request))

    @app.post("/api/study")
    async def join(request: Request) -> JSONResponse:
        _check_origin(request)
        body = await _body(request, limits.max_body_bytes)
        if not isinstance(body, dict) or not set(body) <= {"participant", "consent", "leave"}:
            raise InputError('send {"participant": ID, "consent": true or false}')
        consent, leave = body.get("consent", False), body.get("leave", False)
        if type(consent) is not bool or type(leave) is not bool:
            raise InputError("consent and leave: true or false")
        current = session(request)
        joined = await run_in_threadpool(
            service.join, current, _ip(request), body.get("participant"), consent, leave
        )
        response = JSONResponse(await run_in_threadpool(service.study_state, joined))
        if current is None or joined.id != current.id:  # a new person: a new cookie
            _set_cookie(response, request, service, joined.id)
        return response

    def operator(request: Request) -> list[dict[str, Any]]:
        service.check_limit(f"reads-ip:{_ip(request)}", limits.reads_per_minute_ip, 60.0)
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        presented = token if scheme.lower() == "bearer" else request.query_params.get("token")
        if not service.study.authorised(presented):
            raise Forbidden("the operator's summary needs its token")
        return service.store.summary()

    @app.get("/api/operator")
    def operator_json(request: Request) -> list[dict[str, Any]]:
        return operator(request)

    @app.get("/operator", include_in_schema=False)
    def operator_page(request: Request) -> HTMLResponse:
        page = summary_page(operator(request))
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})


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
        body = {"detail": str(exc), "gone": True, "status": exc.status}
        return JSONResponse(body, status_code=404)

    @app.exception_handler(Limited)
    async def limited(request: Request, exc: Limited) -> JSONResponse:
        return detail(429, str(exc), {"Retry-After": str(exc.retry_after)})

    @app.exception_handler(MalformedCookie)
    async def malformed_cookie(request: Request, exc: MalformedCookie) -> JSONResponse:
        response = detail(400, str(exc))
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return detail(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    # any other exception becomes a generic 500 in ``SecurityHeaders`` (with its headers, I9)
