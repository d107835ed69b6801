"""Test-suite guards: no network beyond loopback, no hub downloads."""

from __future__ import annotations

import os
import socket

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_real_connect = socket.socket.connect


def _guarded_connect(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in _LOOPBACK:
        raise RuntimeError(f"the test suite may only connect to loopback, not {host!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _no_network():
    socket.socket.connect = _guarded_connect
    yield
    socket.socket.connect = _real_connect
