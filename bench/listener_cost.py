"""Listener cost per progress event in the Spark driver: ours against PySpark's own path.

Both listeners receive the same events of the same real streaming query (Kafka source,
Spark's connector, a real broker) in one run. Each is timed in Spark's listener thread
from the moment the JVM hands over the event until the callback returns:

  naive  PySpark's path: QueryProgressEvent.fromJObject(jevent) (the conversion into
         Python objects that every StreamingQueryListener pays), then event.progress.json
  ours   OffsetCommitListener: jevent.progress().json() + queueing for the background sender

    .venv/bin/python -m bench listener_cost [--batches 60]

A brand-new broker from `python -m bench` (or ``--bootstrap``). Prints a table and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import spark_pid
from bench.figures import CpuMeter, Table, broker_pid, ratio
from jobs.spark_session import kafka_spark_session
from spark_offset_listener.listener import OffsetCommitListener


class TimedNaiveBridge:
    """What PySpark's JStreamingQueryListener does, with a stopwatch around it."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        from pyspark.sql.streaming.listener import QueryProgressEvent

        started = time.perf_counter()
        event = QueryProgressEvent.fromJObject(jevent)
        _ = event.progress.json
        self.samples.append(time.perf_counter() - started)

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        pass

    class Java:
        implements: ClassVar[list[str]] = [
            "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
        ]


class TimedOurs(OffsetCommitListener):
    def __init__(self, url: str, group_id: str = "bench") -> None:
        super().__init__(url, group_id=group_id, flush_timeout=0.1, timeout=0.5)
        self.samples: list[float] = []

    def _count(self, started: float) -> None:
        super()._count(started)
        self.samples.append(time.perf_counter() - started)


async def produce(bootstrap: str, topic: str, count: int) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=8, replication_factor=1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    for i in range(count):
        await producer.send(topic, b"x", partition=i % 8)
    await producer.flush()
    await producer.stop()


def summary(name: str, samples: list[float]) -> tuple[str, float, float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000
    return name, p50, p99, statistics.fmean(ordered) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args()

    topic = f"bench-listener-{uuid.uuid4().hex[:8]}"
    asyncio.run(produce(args.bootstrap, topic, args.batches * 80))
    spark = kafka_spark_session("bench-listener-cost")
    from pyspark import SparkContext

    ours = TimedOurs("http://127.0.0.1:9")  # nobody listens: the sender's work is off-thread
    spark.streams.addListener(ours)  # also imports the JVM classes and starts py4j callbacks
    naive = TimedNaiveBridge()
    jvm = SparkContext._jvm
    assert jvm is not None
    spark.streams._jsqm.addListener(jvm.PythonStreamingQueryListenerWrapper(naive))

    # Both listeners hear the same events of one query: one window for both rows.
    meter = CpuMeter(spark=spark_pid(spark), broker=broker_pid())
    with tempfile.TemporaryDirectory() as work, meter:
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "80")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", f"{work}/checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(600)
        deadline = time.monotonic() + 60
        while min(len(naive.samples), len(ours.samples)) < args.batches:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    version = spark.version
    spark.stop()

    rows = [summary("naive (PySpark conversion)", naive.samples), summary("ours", ours.samples)]
    count = min(len(naive.samples), len(ours.samples))
    table = Table(
        f"listener cost per progress event in the driver, {count} events, 8 partitions, "
        f"pyspark {version} (both listeners on the same query)",
        "listener", "p50 ms", "p99 ms", "mean ms",
        cpu=("spark", "broker", "bench"),
    )  # fmt: skip
    for row in rows:
        table.add(*row, meter=meter)
    table.print()
    ratio("mean, naive / ours", rows[0][3], rows[1][3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
