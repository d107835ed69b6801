"""The HTTP side of the OpenAI-compatible backend: bounded responses, URLs, retry hints.

Hostile servers are bounded where responses are read (RELIABILITY B5b): the HTTP client handed
to the official ``openai`` SDK refuses a body while it streams in once it passes a limit that
grows with the ``max_tokens`` asked for (``response_byte_limit``), and refuses compressed bodies
(a small gzip body can inflate a thousandfold). ``retry_after`` reads a server's wait hint,
treating an unusable value as absent.
"""

from __future__ import annotations

import asyncio
import json
import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from stratagem.backends.openai.replies import short
from stratagem.errors import ConfigError

MAX_RESPONSE_BYTES = 8 * 2**20  # response bodies are refused above this, whatever was asked
BASE_RESPONSE_BYTES = 256 * 2**10  # ... and above this plus BYTES_PER_TOKEN per max_tokens
BYTES_PER_TOKEN = 2**10


class Retryable(Exception):
    """An attempt that failed in a way worth another try (a timeout, a 5xx, a reset)."""

    def __init__(self, reason: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(reason)
        self.status, self.retry_after = status, retry_after


class Failed(Exception):
    """A request that failed for good (after its retries, or a 4xx): an error generation."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.status = status


class ResponseRefused(Exception):
    """A response refused while it streamed in: a body over the byte cap, or compressed."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"HTTP {status} response refused: {reason}")
        self.status = status


def bounded_http_client(max_response_bytes: int = MAX_RESPONSE_BYTES) -> Any:
    """The openai SDK's default async HTTP client, refusing (``ResponseRefused``) any response
    body over ``response_byte_limit`` as it streams in, before it is held in memory.

    A ``Content-Length`` over the limit is refused before the body is read. Compression is
    declined (``Accept-Encoding: identity``) and a compressed answer refused, so the limit also
    bounds the decoded body (a small gzip body can inflate a thousandfold).
    """
    import openai

    httpx = httpx_for(openai)
    byte_stream: Any = httpx.AsyncByteStream  # httpx or httpx2: known only at run time

    class CappedStream(byte_stream):
        def __init__(self, stream: Any, status: int, limit: int):
            self._stream, self._status, self._limit = stream, status, limit

        async def __aiter__(self):
            received = 0
            async for chunk in self._stream:
                received += len(chunk)
                if received > self._limit:
                    raise ResponseRefused(self._status, _over(self._limit))
                yield chunk

        async def aclose(self) -> None:
            await self._stream.aclose()

    async def cap_body(response: Any) -> None:
        try:
            request_body = response.request.content
        except httpx.RequestNotRead:  # a streamed request (not ours): only the overall cap
            request_body = b""
        limit = response_byte_limit(request_body, max_response_bytes)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        length = response.headers.get("content-length", "").strip()
        if encoding not in ("", "identity"):
            raise ResponseRefused(response.status_code, f"{short(encoding)}-encoded, not identity")
        if length.isdigit() and int(length) > limit:
            raise ResponseRefused(response.status_code, _over(limit))
        response.stream = CappedStream(response.stream, response.status_code, limit)

    return openai.DefaultAsyncHttpxClient(
        headers={"Accept-Encoding": "identity"}, event_hooks={"response": [cap_body]}
    )


def response_byte_limit(request_body: bytes, max_response_bytes: int = MAX_RESPONSE_BYTES) -> int:
    """The most bytes a response to this request body may have: ``BASE_RESPONSE_BYTES`` plus
    ``BYTES_PER_TOKEN`` per ``max_tokens`` the request asks for, and at most
    ``max_response_bytes`` (all of it without a ``max_tokens``).

    A real answer needs about 100 bytes per token (16 characters, JSON-escaped), so a limit
    per request keeps ``concurrency`` hostile answers at once from costing much memory.
    """
    try:
        max_tokens = json.loads(request_body).get("max_tokens")
    except (ValueError, AttributeError, RecursionError):
        max_tokens = None
    if isinstance(max_tokens, int) and max_tokens > 0:
        return min(max_response_bytes, BASE_RESPONSE_BYTES + BYTES_PER_TOKEN * max_tokens)
    return max_response_bytes


def _over(limit: int) -> str:
    return f"body over the {limit / 2**10:.0f} KiB limit (does the server ignore max_tokens?)"


def httpx_for(openai: Any) -> Any:
    """The httpx flavour the installed openai SDK is built on (``httpx2`` from openai 3)."""
    if hasattr(openai, "DefaultAsyncHttpx2Client"):
        import httpx2

        return httpx2
    import httpx

    return httpx


def serve_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Run ``loop`` in this thread until it is stopped, then close it (a client's own loop)."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


def stop_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Ask ``loop`` to stop from any thread; a closed loop is left alone."""
    try:
        loop.call_soon_threadsafe(loop.stop)
    except RuntimeError:  # already closed
        pass


def check_base_url(base_url: str, httpx: Any) -> None:
    """Raise ``ConfigError`` unless the client's own URL parser reads ``base_url`` as an
    ``http://`` or ``https://`` URL with a host."""
    try:
        url = httpx.URL(base_url)
        usable = url.scheme in ("http", "https") and bool(url.host)
    except (httpx.InvalidURL, TypeError):
        usable = False
    if not usable:
        raise ConfigError(
            f"base URL {base_url!r} is not an http:// or https:// URL with a host; pass one "
            "such as --base-url http://127.0.0.1:8000/v1"
        )


def retry_after(response: Any) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, or ``Retry-After`` in seconds or
    as an HTTP date); ``None`` when absent or unusable (negative, NaN, infinite, garbage)."""
    headers = getattr(response, "headers", None) or {}
    try:
        if "retry-after-ms" in headers:
            seconds = float(headers["retry-after-ms"]) / 1000
        elif "retry-after" in headers:
            value = headers["retry-after"]
            try:
                seconds = float(value)
            except ValueError:
                when = parsedate_to_datetime(value)
                if when.tzinfo is None:
                    when = when.replace(tzinfo=UTC)
                seconds = (when - datetime.now(UTC)).total_seconds()
        else:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def check_settings(
    concurrency: int, max_retries: int, attempt_timeout: float, max_response_bytes: int
) -> None:
    """Raise ``ConfigError`` for a setting no backend could work with."""
    for name, value, least in [
        ("concurrency", concurrency, 1),
        ("max_retries", max_retries, 0),
        ("max_response_bytes", max_response_bytes, 1),
    ]:
        if value < least:
            raise ConfigError(f"{name} must be at least {least}, not {value}")
    if not attempt_timeout > 0:
        raise ConfigError(
            f"attempt_timeout must be a positive number of seconds, not {attempt_timeout}"
        )
