"""The cost of the time lag's one read per lagging partition (issue 38, part 1), on a real
broker: ``--partitions`` lagging partitions (over topics of 100) whose oldest unprocessed
record is older than any history, read by ``KafkaRecordTimeReader`` in one call (what the
lag monitor does: one Fetch per broker, each partition capped) beside one call per
partition (what a reader per partition costs), in one run.

Prints the time of each, the records the fetcher handed back (a whole batch per
partition at most) and the bytes on the wire (the broker's BytesOutPerSec is not read
here: the consumer's own counter of bytes fetched is).

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

PER_TOPIC = 100
RECORDS = 50  # per partition, 200 bytes each, produced in batches of 10


async def fill(bootstrap: str, topics: list[str], stamp: float) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        for topic in topics:
            for p in range(PER_TOPIC):
                for i in range(RECORDS):
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

    batched = KafkaRecordTimeReader(options, timeout=60)
    await batched.record_times({next(iter(wanted)): 0})  # connect before timing
    batched.records_read = 0
    started = time.perf_counter()
    with CpuMeter(broker=broker) as batched_meter:
        found = await batched.record_times(wanted)
    one_call = time.perf_counter() - started
    assert len(found) == len(wanted), f"{len(found)} of {len(wanted)} answered"
    assert all(abs(at - (stamp + 10)) < 0.002 for at in found.values() if at is not None)
    batched_records = batched.records_read
    await batched.close()

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
        f"{len(wanted):,} lagging partitions, {RECORDS} records of 200 B each (the reader "
        "runs in this process: the bench side)",
        "how", "time s", "records handed back", "per partition",
        cpu=("broker", "bench"),
    )  # fmt: skip
    table.add(
        "one call (the lag monitor)", one_call, batched_records,
        f"{batched_records / len(wanted):.1f}", meter=batched_meter,
    )  # fmt: skip
    table.add(
        "a call per partition (100 timed, time scaled; CPU of the 100)", per_partition,
        f"{single.records_read:,} for 100", f"{single.records_read / len(sample):.1f}",
        meter=single_meter,
    )  # fmt: skip
    table.print()
    ratio("time, one call / a call per partition", one_call, per_partition)


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
