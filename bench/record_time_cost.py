"""The cost of the time lag's one read per lagging partition (issue 38, part 1), on a real
broker: ``--partitions`` lagging partitions (over topics of 100) whose oldest unprocessed
record is older than any history, read by ``KafkaRecordTimeReader`` in one call (what the
lag monitor does: one Fetch per broker, each partition capped) beside one call per
partition (what a reader per partition costs), in one run.

Prints the time of each, the longest time the caller's event loop was held meanwhile
(aiokafka parses what it fetched on the loop that runs it: the service runs the read on a
loop of its own, ``runtime.own_loop``, measured beside the plain call), and the records
the fetcher handed back (a whole batch per partition at most).

    .venv/bin/python -m bench record_time_cost --partitions 1000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka import AIOKafkaProducer

from bench.bench_support import create_topic
from bench.figures import CpuMeter, Table, ratio
from harness.kafka_broker import brand_new
from spark_offset_sidecar.adapters.kafka.record_times import KafkaRecordTimeReader
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.ports.kafka import RecordTimeReader
from spark_offset_sidecar.runtime.own_loop import RecordTimesOnOwnLoop

PER_TOPIC = 100
RECORDS = 50  # per partition, 200 bytes each, one a batch


async def fill(bootstrap: str, topics: list[str], stamp: float) -> None:
    """``RECORDS`` records in every partition, one a batch: a round of one record to each
    partition, flushed, then the next (a partition that gets a record now and then, as
    most of a big fleet's do, holds batches of one; the fetcher parses each)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        for i in range(RECORDS):
            for topic in topics:
                for p in range(PER_TOPIC):
                    await producer.send(
                        topic, b"x" * 200, partition=p, timestamp_ms=int((stamp + i) * 1000)
                    )
            await producer.flush()
    finally:
        await producer.stop()


async def run(bootstrap: str, broker: int, partitions: int) -> None:
    topics = [f"lagging-{i}" for i in range(max(1, partitions // PER_TOPIC))]
    for topic in topics:
        await create_topic(bootstrap, topic, PER_TOPIC)
    stamp = time.time() - 3600
    await fill(bootstrap, topics, stamp)
    wanted = {TopicPartition(t, p): 10 for t in topics for p in range(PER_TOPIC)}
    options = {"bootstrap_servers": bootstrap}

    calls: dict[str, tuple[float, float, int, CpuMeter]] = {}
    for how in ("one call, on the caller's loop", "one call, on a loop of its own (the service)"):
        batched = KafkaRecordTimeReader(options, timeout=60)
        reader: RecordTimeReader = RecordTimesOnOwnLoop(batched) if "its own" in how else batched
        await reader.record_times({next(iter(wanted)): 0})  # connect before timing
        batched.records_read = 0
        async with LongestHold() as hold:
            meter = CpuMeter(broker=broker).start()
            started = time.perf_counter()
            found = await reader.record_times(wanted)
            took = time.perf_counter() - started
            meter.stop()
        assert len(found) == len(wanted), f"{len(found)} of {len(wanted)} answered"
        assert all(abs(at - (stamp + 10)) < 0.002 for at in found.values() if at is not None)
        calls[how] = (took, hold.longest, batched.records_read, meter)
        await reader.close()

    single = KafkaRecordTimeReader(options, timeout=60)
    await single.record_times({next(iter(wanted)): 0})
    single.records_read = 0
    sample = dict(list(wanted.items())[:100])  # 100 of them, one call each
    started = time.perf_counter()
    with CpuMeter(broker=broker) as single_meter:
        for tp, offset in sample.items():
            await single.record_times({tp: offset})
    per_partition = (time.perf_counter() - started) * len(wanted) / len(sample)
    await single.close()

    table = Table(
        f"{len(wanted):,} lagging partitions, {RECORDS} records of 200 B each, one a batch "
        "(the reader "
        "runs in this process: the bench side)",
        "how", "time s", "longest hold of the caller's loop ms", "records handed back",
        "per partition", cpu=("broker", "bench"),
    )  # fmt: skip
    for how, (took, longest, records, meter) in calls.items():
        table.add(
            how, took, f"{longest * 1000:.0f}", records, f"{records / len(wanted):.1f}",
            meter=meter,
        )  # fmt: skip
    table.add(
        "a call per partition (100 timed, time scaled; CPU of the 100)", per_partition, "-",
        f"{single.records_read:,} for 100", f"{single.records_read / len(sample):.1f}",
        meter=single_meter,
    )  # fmt: skip
    table.print()
    own, caller = (
        calls["one call, on a loop of its own (the service)"],
        calls["one call, on the caller's loop"],
    )
    ratio("time, one call / a call per partition", caller[0], per_partition)
    ratio("longest hold of the caller's loop, own loop / caller's", own[1], caller[1])


class LongestHold:
    """The longest time the running loop was held while inside: a ticker asks to be
    woken every millisecond and keeps how late it was."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            due = time.perf_counter() + 0.001
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter() - due)

    async def __aenter__(self) -> LongestHold:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="record-times-") as folder:
        broker = brand_new(Path(folder) / "kafka")
        try:
            asyncio.run(run(broker.bootstrap, broker.pid(), args.partitions))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
