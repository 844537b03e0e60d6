"""``adapters.watcher.remote.WatcherAt``: a watcher beside the service, told at its URL.
What it does when the watcher is not there (a real connection to a port nothing listens
on): the failure is the relay's to see, and a whole message is tried again only after
``retry_every`` seconds; it never counts a new generation (the watcher refuses a partial
message instead: ``tests/http/test_watch_app.py``)."""

from __future__ import annotations

import asyncio

import pytest

from harness.machine import free_port
from spark_offset_sidecar.adapters.watcher.remote import WatcherAt
from spark_offset_sidecar.core.ledger import Ledger
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
