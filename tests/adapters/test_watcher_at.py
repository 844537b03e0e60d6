"""``adapters.watcher.remote.WatcherAt``: a watcher run on its own, told at its URL.
What it does when the watcher is not there (a real connection to a port nothing listens
on): the failure is the relay's to see, and a whole message is tried again only after
``retry_every`` seconds; it counts a new generation only when pointed at another URL (a
watcher started again at the same one refuses a partial message instead:
``tests/http/test_watch_app.py``)."""

from __future__ import annotations

import asyncio

import pytest

from harness.machine import free_port
from spark_offset_sidecar.adapters.watcher.remote import WatcherAt
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.errors import WatcherUnavailable
from spark_offset_sidecar.ports.watcher import Told
from spark_offset_sidecar.runtime.memory_relay import MemoryRelay


def test_a_watcher_not_there_is_a_problem_for_retry_every_seconds_then_tried_again() -> None:
    clock = [100.0]
    link = WatcherAt(
        f"http://127.0.0.1:{free_port()}", timeout=5, retry_every=5.0, clock=lambda: clock[0]
    )
    relay = MemoryRelay(Ledger(), link, waiting=lambda _g: None, job=lambda _g: None)

    async def scenario() -> None:
        assert (link.problem, link.generation) == (None, 0)
        with pytest.raises(WatcherUnavailable, match="does not answer"):
            await link.tell(Told({}, whole=True))
        assert link.problem is not None
        assert not await relay.tell(), "a whole message is not built while it is a problem"
        clock[0] += 5.0
        assert link.problem is None  # tried again now
        assert not await relay.tell()  # and refused again: a problem for 5 s more
        assert link.problem is not None
        assert link.generation == 0
        await link.close()

    asyncio.run(scenario())


def test_a_paired_link_tells_the_watcher_its_replica_points_it_at_showing_the_token() -> None:
    """Paired (``point_at`` from each lease renewal): no watcher yet is a problem that
    names how to pair one; each new URL is a new generation (the relay's next message is
    whole), the same URL again is not; every message carries the watchers' token (a real
    HTTP server records what it was sent)."""
    import http.server
    import threading

    seen: list[tuple[str, str | None]] = []

    class Watcher(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            seen.append((self.path, self.headers.get("authorization")))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Watcher)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    link = WatcherAt(None, token=b"sixteen-chars...", timeout=5)

    async def scenario() -> None:
        with pytest.raises(WatcherUnavailable, match="SIDECAR_WATCHER_ADVERTISED_URL"):
            await link.tell(Told({}, whole=True))
        assert "no watcher is paired" in (link.problem or "")
        url = f"http://127.0.0.1:{server.server_address[1]}"
        link.point_at(url)
        assert (link.generation, link.problem) == (1, None)
        link.point_at(url)
        assert link.generation == 1  # the same watcher: told on from where it was
        await link.tell(Told({}, whole=True))
        link.point_at(None)  # its claim lapsed
        assert link.generation == 2
        await link.close()

    try:
        asyncio.run(scenario())
    finally:
        server.shutdown()
    assert seen == [("/memory/told", "Bearer sixteen-chars...")]
