"""A small reverse proxy for the deployment tests: it forwards every request to a server on
127.0.0.1 from its own source address (``127.0.0.2`` by default: a trusted proxy that is not the
loopback address a spoofing client uses), adding ``X-Forwarded-For`` (the address it got the
request from), ``X-Forwarded-Proto`` and ``X-Forwarded-Host`` (the ``Host`` it got), as nginx or
Caddy in front of the page do. With ``tls`` it serves https itself (it terminates TLS)."""

from __future__ import annotations

import http.client
import http.server
import socket
import ssl
import subprocess
import threading
from pathlib import Path

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "trailer"}


class ReverseProxy:
    """Listens on 127.0.0.1 (a free port) and forwards to ``127.0.0.1:upstream``."""

    def __init__(
        self,
        upstream: int,
        *,
        source: str = "127.0.0.2",
        proto: str = "https",
        tls: ssl.SSLContext | None = None,
    ):
        self.forwarded = 0  # requests forwarded

        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in HOP_BY_HOP and not k.lower().startswith("x-forwarded-")
                }
                before = self.headers.get("X-Forwarded-For")  # a chain the client sent is kept
                client = self.client_address[0]
                headers["X-Forwarded-For"] = f"{before}, {client}" if before else client
                headers["X-Forwarded-Proto"] = proto
                headers["X-Forwarded-Host"] = self.headers.get("Host", "")
                conn = http.client.HTTPConnection(
                    "127.0.0.1", upstream, timeout=60, source_address=(source, 0)
                )
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                finally:
                    conn.close()
                proxy.forwarded += 1
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_HEAD = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stops listening."""
        self.server.shutdown()
        self.server.server_close()


def second_loopback_works(address: str = "127.0.0.2") -> bool:
    """Whether this machine can send from ``address`` (Linux routes all of 127/8 to lo)."""
    try:
        with socket.socket() as s:
            s.bind((address, 0))
        return True
    except OSError:
        return False


def self_signed(folder: Path) -> ssl.SSLContext | None:
    """A TLS server context with a fresh self-signed certificate for 127.0.0.1 (made by the
    ``openssl`` command), or None when there is no ``openssl``."""
    key, cert = folder / "key.pem", folder / "cert.pem"
    try:
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", str(key), "-out", str(cert),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context
