"""What keeps the play page safe to expose: the session key, signed session cookies, rate limits,
the same-origin check and the deployment behind a reverse proxy (RELIABILITY I1, I2, I6, I7, I9).

- The session key comes from ``STRATAGEM_SESSION_KEY`` or from a key file beside the database,
  created on first start with 0600 permissions; there is no key in the source (I2).
- A session cookie is ``<session id>.<HMAC-SHA256 of the id>``: a tampered cookie fails the
  check and the browser gets a new session, never someone else's (I1); a cookie that is not ASCII
  is refused with 400 (``MalformedCookie``). Cookies are ``HttpOnly``, ``SameSite=Strict`` and
  ``Secure`` over https (I6).
- Rate limits are sliding windows per key (a session, an IP): a request over the limit gets 429
  with the seconds after which it would pass (I7).
- A state-changing request must carry an ``Origin`` (or, failing that, a ``Referer``) of the page's
  own origin; anything else is refused with 403 (I6).
- Every response carries a strict CSP (``default-src 'self'``, no inline script) and the usual
  hardening headers, and the API's ``no-store`` (``SecurityHeaders``, I5): a server error too, as a
  generic 500 that never carries a traceback (I9).
- Behind a reverse proxy, ``X-Forwarded-Proto``, ``-Host`` and ``-For`` are believed only from the
  proxy addresses named (``--trusted-proxy``, ``ForwardedHeaders``); from any other peer they are
  dropped, so a spoofed ``X-Forwarded-For`` never picks another rate-limit bucket.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stratagem.errors import ConfigError

log = logging.getLogger("stratagem.web")
KEY_ENV = "STRATAGEM_SESSION_KEY"
MIN_KEY_CHARS = 32
COOKIE = "stratagem_session"


def session_key(key_file: str | Path) -> bytes:
    """Returns the key that signs session cookies: ``$STRATAGEM_SESSION_KEY`` when set, else the
    key stored in ``key_file`` (created with 0600 permissions, 256 random bits, on first start).

    Raises:
        ConfigError: the variable is shorter than 32 characters, or the key file is readable by
            other users, empty, or cannot be written.
    """
    env = os.environ.get(KEY_ENV)
    if env is not None:
        if len(env) < MIN_KEY_CHARS:
            raise ConfigError(f"${KEY_ENV} must hold at least {MIN_KEY_CHARS} characters")
        return env.encode()
    path = Path(key_file)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_key(path)
    except OSError as exc:
        raise ConfigError(f"cannot create the session key file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"the session key file {path} is readable by other users; run chmod 600 {path}"
        )
    key = path.read_text(encoding="utf-8").strip()
    if len(key) < MIN_KEY_CHARS:
        raise ConfigError(f"the session key file {path} is empty or short; delete it to renew")
    return key.encode()


def new_id() -> str:
    """Returns an unguessable id (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def sign(key: bytes, session_id: str) -> str:
    """Returns the cookie value for ``session_id``: the id and its HMAC, dot-separated."""
    mac = hmac.new(key, session_id.encode(), hashlib.sha256).digest()
    return f"{session_id}.{base64.urlsafe_b64encode(mac).decode().rstrip('=')}"


class MalformedCookie(ValueError):
    """HTTP 400: the session cookie holds a byte that is not ASCII (no cookie this server sets
    does); the response clears it, so the next request starts afresh."""


def unsign(key: bytes, value: str | None) -> str | None:
    """Returns the session id a cookie value carries, or None when it is missing or tampered.

    Raises:
        MalformedCookie: the value holds a character that is not ASCII.
    """
    if value and not value.isascii():
        raise MalformedCookie("the session cookie is malformed; it was cleared: reload the page")
    if not value or value.count(".") != 1 or len(value) > 200:
        return None
    session_id = value.split(".", 1)[0]
    return session_id if hmac.compare_digest(sign(key, session_id), value) else None


class RateLimiter:
    """Sliding-window counters: ``hit(key, limit, window)`` allows ``limit`` hits per ``window``
    seconds for each key. Thread-safe; memory is bounded by ``prune``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        """Counts against ``clock`` (monotonic seconds; tests pass a fake one)."""
        self.clock = clock
        self._hits: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    def hit(self, key: str, limit: int, window: float) -> int | None:
        """Records a hit of ``key`` and returns None when it is within the limit, else the
        whole seconds to wait (the hit is not recorded then)."""
        now = self.clock()
        with self._lock:
            hits = self._hits.setdefault(key, collections.deque())
            while hits and hits[0] <= now - window:
                hits.popleft()
            if len(hits) >= limit:
                return max(1, math.ceil(hits[0] + window - now))
            hits.append(now)
            return None

    def prune(self, window: float) -> None:
        """Forgets keys with no hit in the last ``window`` seconds."""
        now = self.clock()
        with self._lock:
            for key in [k for k, h in self._hits.items() if not h or h[-1] <= now - window]:
                del self._hits[key]


def same_origin(origin: str | None, referer: str | None, own: str) -> bool:
    """Whether a request comes from the page's own origin ``own`` (``scheme://host[:port]``):
    its ``Origin`` equals it, or, without an ``Origin``, its ``Referer`` starts with it."""
    if origin is not None:
        return origin == own
    return referer is not None and (referer == own or referer.startswith(own + "/"))


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


class SecurityHeaders:
    """ASGI middleware: the CSP and hardening headers on every response, ``no-store`` on the
    API's. An exception that reaches it before the response started becomes a generic 500 (with
    the headers, never a traceback): Starlette's own error response would be sent outside this
    middleware, without them."""

    def __init__(self, app: ASGIApp):
        """Wraps ``app``."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Adds the headers to the response start of an HTTP request."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = scope["path"].startswith("/api/")
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers[name] = value
                if api:
                    headers["cache-control"] = "no-store"
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception as exc:
            if started:  # too late for another response: the server closes the connection
                raise
            log.error("internal error on %s %s: %r", scope.get("method"), scope["path"], exc)
            body = json.dumps({"detail": "internal error"}).encode()
            await send_with_headers(
                {
                    "type": "http.response.start",
                    "status": 500,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send_with_headers({"type": "http.response.body", "body": body})


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")


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


def proxy_networks(values: Sequence[str]) -> tuple[str, ...]:
    """Returns the ``--trusted-proxy`` values as networks (``10.0.0.2`` becomes
    ``10.0.0.2/32``).

    Raises:
        ConfigError: a value is neither an IP address nor a network such as ``10.0.0.0/24``.
    """
    networks = []
    for value in values:
        try:
            networks.append(str(ipaddress.ip_network(value.strip(), strict=False)))
        except ValueError:
            raise ConfigError(
                f"--trusted-proxy {value!r}: not an IP address or network (e.g. 10.0.0.2 or "
                "10.0.0.0/24)"
            ) from None
    return tuple(networks)


_FORWARDED = (b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-for")
_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


class ForwardedHeaders:
    """ASGI middleware for a deployment behind reverse proxies: a request whose peer address is
    in ``networks`` takes its scheme from ``X-Forwarded-Proto``, its ``Host`` from
    ``X-Forwarded-Host`` and its client address from ``X-Forwarded-For`` (the nearest address
    that is not a trusted proxy); from every other peer these headers are dropped unread. The
    last value of each header counts: the one the trusted proxy itself wrote."""

    def __init__(self, app: ASGIApp, networks: Sequence[str]):
        """Wraps ``app``; ``networks`` as ``proxy_networks`` returns them (empty: trust none)."""
        self.app = app
        self.networks = [ipaddress.ip_network(n, strict=False) for n in networks]

    def trusted(self, address: str) -> bool:
        """Whether ``address`` is one of the trusted proxies."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Rewrites the scope of a request from a trusted proxy; strips the headers always."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        found: dict[bytes, list[str]] = {}
        headers = []
        for name, value in scope["headers"]:
            if name in _FORWARDED:
                values = value.decode("latin-1").split(",")
                found.setdefault(name, []).extend(v.strip() for v in values if v.strip())
            else:
                headers.append((name, value))
        scope = dict(scope, headers=headers)
        client = scope.get("client")
        if found and client and self.trusted(client[0]):
            self._apply(scope, found)
        await self.app(scope, receive, send)

    def _apply(self, scope: Scope, found: dict[bytes, list[str]]) -> None:
        proto = (found.get(b"x-forwarded-proto") or [""])[-1].lower()
        if proto in ("http", "https"):
            if scope["type"] == "websocket":
                scope["scheme"] = "wss" if proto == "https" else "ws"
            else:
                scope["scheme"] = proto
        host = (found.get(b"x-forwarded-host") or [""])[-1]
        if _HOST.fullmatch(host):
            headers = [(n, v) for n, v in scope["headers"] if n != b"host"]
            scope["headers"] = [*headers, (b"host", host.encode("latin-1"))]
        # each proxy appends the address it got the request from: walking back past the trusted
        # proxies, the first other address is the client (what lies beyond it may be spoofed)
        for address in reversed(found.get(b"x-forwarded-for", [])):
            if not self.trusted(address):
                scope["client"] = (address, 0)
                break


@dataclass(frozen=True)
class Deployment:
    """Where the page listens and who may reach it: ``hosts`` for ``TrustedHostMiddleware``,
    ``proxies`` for ``ForwardedHeaders`` and ``url``, an address that answers."""

    hosts: list[str]
    proxies: tuple[str, ...]
    url: str


def deployment(host: str, port: int, allowed: list[str], proxies: Sequence[str]) -> Deployment:
    """Returns the page's deployment; ``url`` names the first ``--allowed-host`` when ``host`` is
    a wildcard address (a request naming 0.0.0.0 itself is refused), else ``host``.

    Raises:
        ConfigError: a wildcard address without ``--allowed-host``, or a ``--trusted-proxy``
            that is not an address or network.
    """
    hosts = trusted_hosts(host, allowed)
    networks = proxy_networks(proxies)
    try:
        wildcard = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        wildcard = False
    name = allowed[0] if wildcard else host
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"  # an IPv6 address
    return Deployment(hosts, networks, f"http://{name}:{port}")


def public_name(agent_name: str) -> str:
    """Returns how the page names the opponent: ``agent_name`` without an endpoint (``@URL``,
    which may be an internal address) and with local model paths cut to their last folder."""
    name = agent_name.split("@", 1)[0]
    parts = re.split(r"([+,])", name)
    for i, part in enumerate(parts):
        prefix, _, rest = part.rpartition(":") if part.startswith("llm:") else ("", "", part)
        if rest.startswith(("/", "~", "./", "../")):
            parts[i] = (prefix + ":" if prefix else "") + Path(rest.rstrip("/")).name
    return "".join(parts)
