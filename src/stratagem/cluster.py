"""Connecting to Ray and carrying errors back from its workers (SPEC §10).

Shared by the two things that run on Ray: the tournament/evaluation player
(``tournament.ray.RayPlayer``) and the sharded backend (``backends.sharded.RayBackend``). Ray
itself is imported lazily, inside ``connect``, so importing this module stays light.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from stratagem.errors import StratagemError

__all__ = ["LOCAL", "WORKER_NICENESS", "RaisedOnWorker", "RayWorkerError", "connect", "first_line"]

LOCAL = "local"  # ``--ray`` without an address: start a Ray cluster on this machine
# a local cluster's workers run at the driver's priority: Ray's default (niceness +15, so they
# yield to its own processes) lets any other job on a busy machine starve the run's only players
WORKER_NICENESS = 0
CONNECT_TIMEOUT = 10.0  # seconds a cluster address gets to accept a connection


class RayWorkerError(StratagemError):
    """Ray workers kept dying (or Ray is missing): the run stops, finished episodes are kept."""

    exit_code = 1


class RaisedOnWorker(Exception):
    """A ``StratagemError`` raised on a worker, as data that always pickles (ours need not: an
    ``UnknownNameError`` takes three arguments), so the driver can raise it again."""

    def __init__(self, module: str, name: str, message: str):
        """Record the error's class (``module``, ``name``) and message."""
        super().__init__(module, name, message)

    @classmethod
    def of(cls, exc: StratagemError) -> RaisedOnWorker:
        """Returns ``exc`` as data."""
        return cls(type(exc).__module__, type(exc).__qualname__, str(exc))

    def rebuild(self) -> StratagemError:
        """Returns the original error: same class, same message (its ``__init__`` not rerun)."""
        import importlib

        module, name, message = self.args
        try:
            kind = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            kind = StratagemError
        if not (isinstance(kind, type) and issubclass(kind, StratagemError)):
            kind = StratagemError
        error = kind.__new__(kind)
        Exception.__init__(error, message)
        return error


def connect(
    address: str | None, cpus: int | None = None, timeout: float = CONNECT_TIMEOUT
) -> tuple[Any, bool]:
    """Connects to Ray: to the cluster at ``address``, or a local cluster of ``cpus`` CPUs
    (default: this machine's) when ``address`` is None or ``local``; returns (the ray module,
    whether this call started the connection, so the caller shuts it down).

    A cluster address (``HOST:PORT``, ``ray://HOST:PORT``) must accept a connection within
    ``timeout`` seconds before Ray is asked to join it: Ray itself retries an address that does
    not answer for many minutes.

    Raises:
        RayWorkerError: Ray is not installed or the cluster cannot be reached.
    """
    try:
        import ray
    except ImportError:
        raise RayWorkerError(
            "--ray needs Ray: pip install 'stratagem[ray]' (or pip install ray)"
        ) from None
    if ray.is_initialized():
        return ray, False
    address = None if address in (None, "", LOCAL) else address
    if address is not None:
        check_reachable(address, timeout)
    quiet: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
    try:
        if address is None:
            ray.init(
                num_cpus=cpus or os.cpu_count() or 1,
                _system_config={"worker_niceness": WORKER_NICENESS},
                **quiet,
            )
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        where = address or "a local cluster"
        raise RayWorkerError(f"cannot start Ray on {where}: {exc}") from None
    return ray, True


def check_reachable(address: str, timeout: float) -> None:
    """Raise ``RayWorkerError`` unless the host and port of ``address`` (``HOST:PORT`` or
    ``ray://HOST:PORT``; ``auto`` and other forms are left to Ray) accept a TCP connection within
    ``timeout`` seconds."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    host = host.strip("[]")  # an IPv6 literal: [::1]:6379
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise RayWorkerError(
            f"cannot reach the Ray cluster at {address} ({reason}, waited up to {timeout:g} s); "
            "check --ray-address, or allow longer with --ray-timeout"
        ) from None


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an error's message (Ray's carry whole tracebacks)."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    return lines[0] if lines else type(exc).__name__
