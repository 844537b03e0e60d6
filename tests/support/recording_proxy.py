"""An HTTP proxy in front of a real service that records every answer it passes on: which
client (its User-Agent) posted what path, and the status it got. For tests that must
see every answer a listener was given, where neither the listener nor the service logs
them."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

FORWARDED = ("Content-Type", "Authorization", "User-Agent")


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str
    status: int
    user_agent: str


class RecordingProxy(ThreadingHTTPServer):
    """Forwards each request to ``upstream`` (a base URL) and its answer back; keeps an
    ``Exchange`` for each. A request the upstream does not answer gets 502 (recorded)."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(base_url=upstream, timeout=30)
        super().__init__(("127.0.0.1", 0), _Forwarding)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def forward(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {k: v for k in FORWARDED if (v := handler.headers.get(k)) is not None}
        try:
            answer = self._client.request(method, handler.path, content=body, headers=headers)
            status, content = answer.status_code, answer.content
            kind = answer.headers.get("Content-Type", "application/json")
        except httpx.TransportError as exc:
            status, content, kind = 502, str(exc).encode(), "text/plain"
        with self._lock:
            agent = handler.headers.get("User-Agent", "")
            self.exchanges.append(Exchange(method, handler.path, status, agent))
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    def posted(self, path: str = "/v1/progress") -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.method == "POST" and e.path == path]

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self._client.close()


class _Forwarding(BaseHTTPRequestHandler):
    server: RecordingProxy

    def do_GET(self) -> None:
        self.server.forward(self, "GET")

    def do_POST(self) -> None:
        self.server.forward(self, "POST")

    def log_message(self, *args: Any) -> None:
        pass
