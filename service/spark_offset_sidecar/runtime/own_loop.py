"""Work whose parsing would hold the events' loop, on an event loop of its own
(docs/decisions.md, "Record reads on a loop of their own").

aiokafka parses what the record-time read fetched on the loop that awaits it, in one
stretch (200-290 ms at 3,200 lagging partitions); on a loop in its own thread that holds
only that loop. Everything the wrapped reader does runs there (its clients are never
shared with the caller's loop); a call cancelled here is cancelled there; ``close`` ends
the thread, and a call after it is refused (``RuntimeError``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.ports.kafka import RecordTimeReader

T = TypeVar("T")


class OwnLoop:
    """An event loop running in a thread of its own, started on first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def _started(self) -> asyncio.AbstractEventLoop:
        if self._closed:
            raise RuntimeError(f"{self.name}: its loop is closed")
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """``work()`` awaited on this loop; its result (or exception) here."""

        async def there() -> T:
            return await work()

        loop = self._started()  # before the coroutine is made: a closed loop refuses
        future = asyncio.run_coroutine_threadsafe(there(), loop)
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop the loop and wait for its thread (what still runs there is dropped)."""
        self._closed = True
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


class RecordTimesOnOwnLoop:
    """A ``RecordTimeReader`` whose reads run on a loop of their own (``OwnLoop``)."""

    def __init__(self, reader: RecordTimeReader, name: str = "record times") -> None:
        self._reader = reader
        self.loop = OwnLoop(name)

    async def record_times(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, float | None]:
        wanted = dict(offsets)  # a copy: the caller's map may change while this runs
        return await self.loop.run(lambda: self._reader.record_times(wanted))

    async def close(self) -> None:
        try:
            if self.loop.thread is not None:
                await self.loop.run(self._reader.close)
        finally:
            self.loop.close()
