"""Spark with the sidecar down: batch count and durations side by side with and without
the listener, in one run.

The same streaming query (Spark's Kafka connector, 200 records a batch, noop sink) runs
over the same records twice: once with no listener, once with ``OffsetCommitListener``
pointed at a port where nothing listens (so every delivery fails and is retried in the
background). Spark should not notice.

    .venv/bin/python -m bench service_down [--records 16000]

A brand-new broker from `python -m bench` (or ``--bootstrap``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import create_topic, percentiles, spark_pid
from bench.figures import CpuMeter, Table, broker_pid, ratio
from harness.machine import free_port
from jobs.spark_session import kafka_spark_session
from spark_offset_listener.listener import OffsetCommitListener


async def fill(bootstrap: str, topic: str, records: int) -> None:
    from aiokafka import AIOKafkaProducer

    await create_topic(bootstrap, topic, 4)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for _ in range(records):
            await producer.send(topic, b"x" * 100)
        await producer.flush()
    finally:
        await producer.stop()


def run(spark: Any, bootstrap: str, topic: str) -> tuple[int, list[float], float]:
    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "200")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", f"{work}/checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(900)
        wall = time.monotonic() - started
        durations = [p["durationMs"]["triggerExecution"] for p in query.recentProgress]
        batches = query.lastProgress["batchId"] + 1
    return batches, durations, wall


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=16000)
    args = parser.parse_args()

    topic = f"bench-down-{uuid.uuid4().hex[:8]}"
    asyncio.run(fill(args.bootstrap, topic, args.records))
    spark = kafka_spark_session("bench-service-down")
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "1000")
    run(spark, args.bootstrap, topic)  # warm-up: JIT, connector, py4j

    sides = {"spark": spark_pid(spark), "broker": broker_pid()}
    with CpuMeter(**sides) as without_meter:
        without = run(spark, args.bootstrap, topic)
    listener = OffsetCommitListener(
        f"http://127.0.0.1:{free_port()}", group_id="bench-down", flush_timeout=1.0
    )
    spark.streams.addListener(listener)
    with CpuMeter(**sides) as with_meter:
        with_down = run(spark, args.bootstrap, topic)
    spark.streams.removeListener(listener)
    stats = listener.sender.stats
    spark.stop()

    table = Table(
        f"the same {args.records} records, 200 a batch, noop sink; the service down in run 2",
        "run", "batches", "p50 ms", "p99 ms", "mean ms", "wall s",
        cpu=("spark", "broker", "bench"),
    )  # fmt: skip
    for name, (batches, durations, wall), meter in (
        ("no listener", without, without_meter),
        ("listener, service unreachable", with_down, with_meter),
    ):
        p50, p99, mean = percentiles(durations)
        table.add(name, batches, round(p50), round(p99), round(mean), f"{wall:.1f}", meter=meter)
    table.print()
    ratio(
        "mean batch duration, with / without",
        percentiles(with_down[1])[2],
        percentiles(without[1])[2],
    )
    print(
        f"listener: {listener.events} events, {stats.delivered} delivered, "
        f"{stats.retries} retries, last error: {stats.last_error}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
