"""The play page's refusals, each an HTTP status (``app`` maps them): 403, 404 and 429."""

from __future__ import annotations

from stratagem.web.records import Status

__all__ = ["Forbidden", "Limited", "NotFound"]


class Forbidden(PermissionError):
    """HTTP 403: another session's game, or a cross-site request."""


class NotFound(LookupError):
    """HTTP 404: no such game (never created, or forgotten after it was stored); ``status`` is
    its stored status when the database holds it."""

    def __init__(self, message: str = "no such game", status: Status | None = None):
        super().__init__(message)
        self.status = status


class Limited(RuntimeError):
    """HTTP 429: a rate limit; ``retry_after`` in whole seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after
