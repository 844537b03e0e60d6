"""Reads on a loop of their own (``runtime.own_loop``): the caller's loop runs while the
read holds its own, results and errors come back, cancellation and closing reach it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping

import pytest

from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import KafkaReadError
from spark_offset_sidecar.runtime.own_loop import RecordTimesOnOwnLoop

TP = TopicPartition("orders", 0)


class HoldingReader:
    """Holds the loop that runs it (as aiokafka parsing a big fetch does) until the
    caller's loop has run, or ``patience`` seconds; ``holding`` is set as it begins to."""

    def __init__(self, caller_ran: threading.Event, patience: float = 60.0) -> None:
        self.caller_ran = caller_ran
        self.patience = patience
        self.holding = threading.Event()
        self.threads: list[int] = []
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.closed_on: int | None = None
        self.fail = False

    async def record_times(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, float | None]:
        self.threads.append(threading.get_ident())
        self.loops.append(asyncio.get_running_loop())
        if self.fail:
            raise KafkaReadError("the brokers are gone")
        self.holding.set()
        seen = self.caller_ran.wait(self.patience)  # blocks this loop, not the caller's
        return {tp: (1.0 if seen else None) for tp in offsets}

    async def close(self) -> None:
        self.closed_on = threading.get_ident()


def test_the_callers_loop_runs_while_the_read_holds_its_own() -> None:
    caller_ran = threading.Event()
    inner = HoldingReader(caller_ran)

    async def scenario() -> None:
        reader = RecordTimesOnOwnLoop(inner)

        async def ticker() -> None:
            # Runs on the caller's loop while the read holds its own, or never.
            assert await asyncio.to_thread(inner.holding.wait, 60), "the read began"
            caller_ran.set()

        found, _ = await asyncio.gather(reader.record_times({TP: 5}), ticker())
        # On the caller's loop the read would hold it: the ticker could not run, and the
        # read would give up after its patience and answer None.
        assert found == {TP: 1.0}
        assert inner.threads[0] != threading.get_ident()
        assert inner.loops[0] is not asyncio.get_running_loop()
        await reader.close()
        assert inner.closed_on == inner.threads[0]  # closed where it ran
        assert reader.loop.thread is None
        with pytest.raises(RuntimeError, match="closed"):
            await reader.record_times({TP: 5})

    asyncio.run(scenario())


def test_a_failed_read_raises_in_the_caller() -> None:
    inner = HoldingReader(threading.Event())
    inner.fail = True

    async def scenario() -> None:
        reader = RecordTimesOnOwnLoop(inner)
        with pytest.raises(KafkaReadError, match="gone"):
            await reader.record_times({TP: 5})
        await reader.close()

    asyncio.run(scenario())


def test_a_read_cancelled_by_the_caller_is_cancelled_on_its_loop() -> None:
    started, stopped = threading.Event(), threading.Event()

    class Slow:
        async def record_times(
            self, offsets: Mapping[TopicPartition, int]
        ) -> dict[TopicPartition, float | None]:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                stopped.set()
                raise
            return {}

        async def close(self) -> None:
            pass

    async def scenario() -> None:
        reader = RecordTimesOnOwnLoop(Slow())
        task = asyncio.create_task(reader.record_times({TP: 5}))
        assert await asyncio.to_thread(started.wait, 60), "the read began"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(stopped.wait, 60)
        await reader.close()

    asyncio.run(scenario())


def test_closing_a_reader_never_used_starts_no_thread() -> None:
    inner = HoldingReader(threading.Event())
    reader = RecordTimesOnOwnLoop(inner)
    asyncio.run(reader.close())
    assert reader.loop.thread is None
    assert inner.closed_on is None
