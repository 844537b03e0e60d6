"""An HTTP server in place of the sidecar, for the listener's own tests: it answers each
POST with the statuses a test queues (then 200) and records what it received. (The
listener against the real service and Kafka: ``tests/e2e``.)"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeSidecar(ThreadingHTTPServer):
    """Answers each POST with the next status in ``statuses`` (then 200); records bodies.
    A test that clears ``answering`` holds every answer until it sets it again; ``arrived``
    is set once a POST has been read."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self.statuses: list[int] = []
        self.answering = threading.Event()
        self.answering.set()
        self.arrived = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeSidecar

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.arrived.set()
        self.server.answering.wait(300)  # held by the test, which lets it go
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        if status == 200:
            self.server.received.append(json.loads(body))
            self.server.headers_seen.append(dict(self.headers))
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


def progress(query: str, batch: int) -> str:
    return json.dumps({"id": query, "batchId": batch, "sources": []})
