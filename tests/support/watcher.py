"""The service's watcher in the tests' event loop: its own app (``create_watch_app``) on
the test's Kafka doubles and clock, its lifespan run and its requests answered as its
child program runs and answers them (``adapters.watcher.answering``), asked as the service
asks its child (``adapters.watcher.child.AskedWatcher``). Its brief is encoded and read
back, its memory told through its ``MEMORY_UPDATES`` route, its readers' requests passed
on by the service's forwarding routes: only the process and its channel differ (tested by
tests/adapters/test_child_channel.py and the e2e tests that run ``serve``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from spark_offset_sidecar.adapters.child_process import ChildGone
from spark_offset_sidecar.adapters.watcher.answering import Answering
from spark_offset_sidecar.adapters.watcher.child import AskedWatcher
from spark_offset_sidecar.app.parts import MakeWatcher, Parts
from spark_offset_sidecar.app.watch import (
    OpenDatabase,
    WatchedDatabase,
    create_watch_app,
    open_database,
)
from spark_offset_sidecar.app.watcher_brief import WatcherBrief
from spark_offset_sidecar.http.state import Watching
from spark_offset_sidecar.ports.kafka import KafkaReading
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.watcher import Answer, ChannelRequest
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.topology import Topology


class LoopWatcher(AskedWatcher):
    def __init__(
        self,
        brief: bytes,
        kafka: KafkaReading,
        clock: Callable[[], float] = time.time,
        database: OpenDatabase = open_database,
    ) -> None:
        super().__init__()
        self._brief, self._kafka, self._clock, self._database = brief, kafka, clock, database
        self._answering: Answering | None = None
        self.app: Any = None  # its app, once started
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.starts = 0

    @property
    def generation(self) -> int:
        return self.starts

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        brief = WatcherBrief.model_validate_json(self._brief)  # as the child reads it
        settings, topology = brief.settings, brief.topology
        app = create_watch_app(settings, topology, self._kafka, self._database, self._clock)
        self.app, self._answering, self._stop = app, Answering(app), asyncio.Event()
        self._task = asyncio.create_task(self._answering.run(self._stop), name="watcher app")
        self.starts += 1

    async def first_ready(self) -> bool:
        """As the child's, asked once its lifespan has started or ended (no poll's pause)."""
        if self._answering is not None and self._task is not None:
            started = asyncio.ensure_future(self._answering.started.wait())
            await asyncio.wait({started, self._task}, return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
        return await super().first_ready()

    async def run(self) -> None:
        """Until cancelled; a watcher that could not start says why (``problem``)."""
        assert self._task is not None
        try:
            await asyncio.shield(self._task)
        except Exception as exc:
            self._problem = f"the watcher could not start: {exc}"
        await asyncio.Event().wait()

    async def _carry(self, request: ChannelRequest) -> Answer:
        if self._answering is None or not self.running:
            raise ChildGone("the watcher is not running")
        return await self._answering.answer(request)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


@dataclass
class LoopWatchers:
    """Makes the service's watcher in the tests' event loop, on ``kafka``, ``clock`` and
    the database ``database`` opens (as the child opens it, or ``with_board``'s);
    ``made``: those it made."""

    kafka: KafkaReading
    clock: Callable[[], float] = time.time
    database: OpenDatabase = open_database
    made: list[LoopWatcher] = field(default_factory=list)

    def __call__(self, brief: WatcherBrief) -> LoopWatcher:
        watcher = LoopWatcher(brief.encode(), self.kafka, self.clock, self.database)
        self.made.append(watcher)
        return watcher

    def watching(self) -> Watching:
        """What the last watcher made runs, once started."""
        started = self.made[-1].app.state.runtime.life.started
        assert isinstance(started, Watching), "the watcher has not started"
        return started


def loop_watcher(
    kafka: KafkaReading,
    clock: Callable[[], float] = time.time,
    database: OpenDatabase = open_database,
) -> MakeWatcher:
    """``LoopWatchers`` of ``kafka``, ``clock`` and ``database``."""
    return LoopWatchers(kafka, clock, database)


def with_board(board: StatusBoard) -> OpenDatabase:
    """The database as the child opens it, its reports published on ``board`` (a double
    that apps on SQLite share, fails at will and hands groups over)."""

    def opened(stack: AsyncExitStack, settings: Settings, topology: Topology) -> WatchedDatabase:
        return replace(open_database(stack, settings, topology), board=board)

    return opened


def watchers_of(parts: Parts) -> LoopWatchers:
    assert isinstance(parts.watcher, LoopWatchers)
    return parts.watcher
