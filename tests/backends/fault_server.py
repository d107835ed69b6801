"""A scripted OpenAI-compatible server on 127.0.0.1 for fault tests.

Each request pops the next action from ``actions`` (the last one repeats), or calls ``handler``:
``("ok", content)``, ``("ok", content, finish_reason)``, ``("status", code, headers)``,
``("sleep", seconds)``, ``("raw", body_bytes)``, ``("body", json_obj)``, and hostile ones:
``("trickle", seconds_per_byte)`` (a completion sent one byte at a time),
``("trickle_headers", seconds_per_byte)`` (the status line and headers too),
``("huge", content_chars, send_length)`` (a completion of that many characters, written in
pieces so the server never holds it; ``send_length=False`` omits Content-Length),
``("gzip", body_bytes)`` (gzip-encoded). It counts requests and the most requests it ever had in
flight at once, and keeps each request's arrival time and headers.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(content, finish_reason="stop", **extra):
    body = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "system_fingerprint": "fp-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }
    body.update(extra)
    return body


class FaultServer:
    def __init__(self, actions=None, handler=None, delay=0.0):
        self.actions = list(actions or [("ok", "COOPERATE")])
        self.handler = handler
        self.delay = delay
        self.requests: list[dict] = []
        self.arrivals: list[float] = []  # time.monotonic() when each request arrived
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(request)
                    server.arrivals.append(time.monotonic())
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    index = len(server.requests) - 1
                try:
                    if server.delay:
                        time.sleep(server.delay)
                    action = (
                        server.handler(request, index)
                        if server.handler
                        else server.actions[min(index, len(server.actions) - 1)]
                    )
                    self._respond(action)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _respond(self, action):
                kind = action[0]
                if kind == "sleep":
                    time.sleep(action[1])
                    action = ("ok", "late")
                    kind = "ok"
                if kind == "ok":
                    body = json.dumps(completion(*action[1:])).encode()
                    self._send(200, body)
                elif kind == "body":
                    self._send(200, json.dumps(action[1]).encode())
                elif kind == "raw":
                    self._send(200, action[1])
                elif kind == "trickle":
                    self._trickle(json.dumps(completion("DEFECT")).encode(), action[1])
                elif kind == "trickle_headers":
                    body = json.dumps(completion("DEFECT")).encode()
                    head = (
                        b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n"
                        + f"content-length: {len(body)}\r\n\r\n".encode()
                    )
                    self._trickle(head + body, action[1], raw=True)
                elif kind == "huge":
                    self._huge(action[1], action[2])
                elif kind == "gzip":
                    self._send(200, gzip.compress(action[1]), {"content-encoding": "gzip"})
                elif kind == "status":
                    headers = action[2] if len(action) > 2 else {}
                    self._send(
                        action[1],
                        json.dumps({"error": {"message": f"fault {action[1]}"}}).encode(),
                        headers,
                    )

            def _trickle(self, data, seconds_per_byte, raw=False):
                if not raw:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.flush()
                for i in range(len(data)):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(seconds_per_byte)

            def _huge(self, chars, send_length):
                head, tail = json.dumps(completion("<>")).encode().split(b"<>")
                self.send_response(200)
                self.send_header("content-type", "application/json")
                if send_length:
                    self.send_header("content-length", str(len(head) + chars + len(tail)))
                self.end_headers()
                self.wfile.write(head)
                piece = b"A" * 2**20
                for start in range(0, chars, len(piece)):
                    self.wfile.write(piece[: min(len(piece), chars - start)])
                self.wfile.write(tail)

            def _send(self, code, body, headers=None):
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def action(self, request, index):
        if self.handler is not None:
            return self.handler(request, index)
        return self.actions[min(index, len(self.actions) - 1)]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
