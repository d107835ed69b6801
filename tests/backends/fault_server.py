"""A scripted OpenAI-compatible server on 127.0.0.1 for fault tests.

Each request pops the next action from ``actions`` (the last one repeats), or calls ``handler``:
``("ok", content)``, ``("ok", content, finish_reason)``, ``("status", code, headers)``,
``("sleep", seconds)``, ``("raw", body_bytes)``, ``("body", json_obj)``. It counts requests and the
most requests it ever had in flight at once.
"""

from __future__ import annotations

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
                elif kind == "status":
                    headers = action[2] if len(action) > 2 else {}
                    self._send(
                        action[1],
                        json.dumps({"error": {"message": f"fault {action[1]}"}}).encode(),
                        headers,
                    )

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
