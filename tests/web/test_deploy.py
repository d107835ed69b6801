"""Deployment behind a reverse proxy (RELIABILITY I6, I7, I9): the forwarded headers are believed
only from ``--trusted-proxy`` addresses, a spoofed ``X-Forwarded-For`` from loopback picks no
other rate-limit bucket, a whole game plays through a proxy that terminates TLS, and the printed
URL answers."""

from __future__ import annotations

import re
import signal

import httpx2
import pytest
from fastapi.testclient import TestClient

from stratagem.errors import ConfigError
from stratagem.web.app import Limits, create_app
from stratagem.web.security import COOKIE, deployment, proxy_networks

from .conftest import LiveServer
from .proxy import ReverseProxy, second_loopback_works
from .test_server import Serve, rows

PUBLIC = "https://play.example"
FORWARDED = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "play.example"}


def _client(app, address: str) -> TestClient:
    """A client whose requests reach the app from ``address`` (naming the internal host)."""
    return TestClient(
        app, base_url="http://app.internal", client=(address, 40000), raise_server_exceptions=False
    )


def _new_game(client: TestClient, forwarded_for: str, origin: str = PUBLIC):
    headers = {**FORWARDED, "X-Forwarded-For": forwarded_for, "Origin": origin}
    client.cookies.clear()
    return client.post("/api/games", headers=headers)


def test_forwarded_headers_are_believed_from_a_trusted_proxy_only(serve):
    server = serve(limits=Limits(games_per_hour_ip=2))
    app = create_app(
        server.service,
        allowed_hosts=["play.example", "app.internal"],
        trusted_proxies=proxy_networks(["10.0.0.2"]),
    )
    proxy, stranger = _client(app, "10.0.0.2"), _client(app, "10.0.0.3")
    # through the proxy: https and the public host make the page's own origin; the cookie is Secure
    r = _new_game(proxy, "203.0.113.7")
    assert r.status_code == 201, r.text
    assert "Secure" in r.headers["set-cookie"]
    # each person behind the proxy has their own per-IP bucket, however the chain begins
    assert _new_game(proxy, "198.51.100.1, 203.0.113.7").status_code == 201
    assert _new_game(proxy, "203.0.113.7").status_code == 429
    assert _new_game(proxy, "203.0.113.8").status_code == 201
    # the same headers from any other address are dropped: its origin is http://app.internal
    assert _new_game(stranger, "203.0.113.9").status_code == 403
    codes = [
        _new_game(stranger, f"192.0.2.{i}", origin="http://app.internal").status_code
        for i in range(3)
    ]
    assert codes == [201, 201, 429]  # one bucket: the stranger's own address
    # a Host forwarded by the proxy is checked like any other host
    r = proxy.get("/api/session", headers={"X-Forwarded-Host": "evil.example"})
    assert r.status_code == 400


def test_proxy_networks_and_the_printed_url(serve):
    assert proxy_networks(["10.0.0.2", " 10.1.0.0/16 ", "::1"]) == (
        "10.0.0.2/32",
        "10.1.0.0/16",
        "::1/128",
    )
    for bad in ("10.0.0.300", "proxy.example", ""):
        with pytest.raises(ConfigError, match="--trusted-proxy"):
            proxy_networks([bad])
    assert deployment("127.0.0.1", 8000, [], []).url == "http://127.0.0.1:8000"
    assert deployment("::1", 8000, [], []).url == "http://[::1]:8000"
    assert deployment("10.0.0.5", 80, ["play.example"], []).url == "http://10.0.0.5:80"
    assert deployment("::", 8000, ["play.example"], []).url == "http://play.example:8000"
    # --host 0.0.0.0 --allowed-host NAME: the printed URL names NAME, which answers; a request
    # naming 0.0.0.0 (the URL printed before) is refused with 400
    server = serve()
    site = deployment("0.0.0.0", 0, ["localhost"], [])
    live = LiveServer(create_app(server.service, allowed_hosts=site.hosts))
    try:
        url = deployment("0.0.0.0", live.port, ["localhost"], []).url
        assert url == f"http://localhost:{live.port}"
        host = url.split("//", 1)[1]
        with httpx2.Client(base_url=live.url) as client:
            assert client.get("/api/session", headers={"Host": host}).status_code == 200
            old = f"0.0.0.0:{live.port}"
            assert client.get("/api/session", headers={"Host": old}).status_code == 400
    finally:
        live.stop()


def test_spoofed_forwarding_headers_from_loopback_are_ignored(tmp_path):
    server = Serve(tmp_path, "--games-per-hour-ip", "2")
    try:
        codes = []
        for i in range(3):
            with httpx2.Client(base_url=server.base, headers={"Origin": server.base}) as c:
                codes.append(c.post("/api/games", headers={"X-Forwarded-For": f"10.9.0.{i}"}))
        assert [r.status_code for r in codes] == [201, 201, 429]
        https = server.base.replace("http://", "https://")
        with httpx2.Client(base_url=server.base) as c:
            r = c.post(
                "/api/games",
                headers={
                    "X-Forwarded-Proto": "https",
                    "Origin": https,
                    "X-Forwarded-For": "1.2.3.4",
                },
            )
        assert r.status_code == 403 and "set-cookie" not in r.headers
    finally:
        server.stop(signal.SIGKILL)


@pytest.mark.skipif(not second_loopback_works(), reason="needs 127.0.0.2 (Linux loopback)")
def test_a_whole_game_through_a_tls_terminating_proxy(tmp_path):
    server = Serve(tmp_path, "--allowed-host", "play.example", "--trusted-proxy", "127.0.0.2")
    proxy = ReverseProxy(server.port, source="127.0.0.2", proto="https")
    try:
        assert f"http://127.0.0.1:{server.port} (games stored in" in server.log.read_text()
        client = httpx2.Client(
            base_url=proxy.url, headers={"Host": "play.example", "Origin": PUBLIC}
        )
        r = client.post("/api/games")
        assert r.status_code == 201, r.text
        # the browser got a Secure cookie (it sees https) and sends it back over https; this
        # client speaks plain http to the proxy, so it sends it by hand
        cookie = r.headers["set-cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie
        value = re.match(rf"{COOKIE}=([^;]+)", cookie)
        assert value is not None
        client.headers["Cookie"] = f"{COOKIE}={value.group(1)}"
        gid = r.json()["game_id"]

        def settle() -> dict:
            for _ in range(3000):
                state = client.get(f"/api/games/{gid}").json()
                if not state["thinking"]:
                    return state
            raise AssertionError("the model kept thinking")

        state = settle()
        r = client.post(f"/api/games/{gid}/turn", json={"kind": "message", "text": "hello"})
        assert r.status_code == 200, r.text
        state = settle()
        while not state["over"]:
            body = {"kind": "propose", "books": 0, "hats": 2, "balls": 1}
            r = client.post(f"/api/games/{gid}/turn", json=body)
            assert r.status_code in (200, 409), r.text
            state = settle()
        assert state["outcome"]["end"] in ("agreement", "disagreement")
        # the same request straight from loopback, with the proxy's headers, is refused
        direct = httpx2.Client(base_url=server.base, headers={**FORWARDED, "Origin": PUBLIC})
        assert direct.post("/api/games").status_code == 403
        direct.close()
        client.close()
        assert proxy.forwarded >= 5
    finally:
        proxy.stop()
        server.stop(signal.SIGKILL)
    assert rows(server.db) == [(gid, "finished")]
