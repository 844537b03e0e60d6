"""The peers side by side: a naive synchronous committer in the listener (what
freeza-offset and the Scala listener do) against ours, on the same Spark job, in one run.

    .venv/bin/python -m bench peers --seconds 60

One real streaming query (Spark's Kafka connector, 4 partitions, a 1-second trigger, a
producer at ``--rate`` records/s) with two listeners that receive the same events, each
committing to its own consumer group:

  naive  PySpark's listener path (``QueryProgressEvent.fromJObject``), then the end
         offsets parsed and committed with a Kafka consumer, waiting for the answer, in
         Spark's listener thread (aiokafka on a loop of its own, awaited synchronously).
  ours   ``OffsetCommitListener`` -> the sidecar (SQLite, synchronous=FULL) -> Kafka.

Figures: time in Spark's listener thread per event, and batch end -> offsets committed
in Kafka (a poller reads both groups every 5 ms; batch end = progress timestamp +
triggerExecution).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.batch_commits import batch_end, run_while_producing, watch_commits
from bench.bench_support import Sidecar, create_topic, percentiles, spark_pid
from bench.figures import CpuMeter, Table, broker_pid
from bench.listener_cost import TimedOurs
from jobs.spark_session import kafka_spark_session


class NaiveSyncCommitter:
    """A listener that commits each progress's end offsets itself, synchronously."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap, self.group = bootstrap, group
        self.samples: list[float] = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.consumer: Any = None

    async def _commit(self, offsets: dict[tuple[str, int], int], batch: int) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        if self.consumer is None:
            self.consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False
            )
            await self.consumer.start()
        metadata = json.dumps({"batch_id": batch})
        tps = {TopicPartition(t, p) for t, p in offsets}
        if not tps <= self.consumer.assignment():
            self.consumer.assign(list(tps | self.consumer.assignment()))
            self.consumer.pause(*self.consumer.assignment())
        await self.consumer.commit(
            {TopicPartition(t, p): (o, metadata) for (t, p), o in offsets.items()}
        )

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        from pyspark.sql.streaming.listener import QueryProgressEvent

        started = time.perf_counter()
        progress = QueryProgressEvent.fromJObject(jevent).progress
        offsets = {}
        for source in progress.sources:
            end = json.loads(source.endOffset) if source.endOffset else {}
            for topic, partitions in end.items():
                for partition, offset in partitions.items():
                    offsets[(topic, int(partition))] = offset
        if offsets:
            asyncio.run_coroutine_threadsafe(
                self._commit(offsets, progress.batchId), self.loop
            ).result(30)
        self.samples.append(time.perf_counter() - started)

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        pass

    def close(self) -> None:
        if self.consumer is not None:
            asyncio.run_coroutine_threadsafe(self.consumer.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)

    class Java:
        implements: ClassVar[list[str]] = [
            "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
        ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=float, default=2000)
    args = parser.parse_args()

    topic = f"bench-peers-{uuid.uuid4().hex[:8]}"
    ours_group, naive_group = f"peers-ours-{topic[-8:]}", f"peers-naive-{topic[-8:]}"
    asyncio.run(create_topic(args.bootstrap, topic, 4))
    sidecar = Sidecar(args.bootstrap)
    spark = kafka_spark_session("bench-peers")
    from pyspark import SparkContext

    ours = TimedOurs(sidecar.url, group_id=ours_group)
    spark.streams.addListener(ours)
    naive = NaiveSyncCommitter(args.bootstrap, naive_group)
    jvm = SparkContext._jvm
    assert jvm is not None
    spark.streams._jsqm.addListener(jvm.PythonStreamingQueryListenerWrapper(naive))
    seen = {"ours": dict[int, float](), "naive": dict[int, float]()}
    stop = threading.Event()
    watchers = [
        watch_commits(args.bootstrap, ours_group, seen["ours"], stop),
        watch_commits(args.bootstrap, naive_group, seen["naive"], stop),
    ]
    # Both listeners on one query: one window; the naive one commits from this process
    # (``bench``), ours through the service.
    sides = {"service": sidecar.process.pid, "spark": spark_pid(spark), "broker": broker_pid()}
    with CpuMeter(**sides) as meter:
        progresses = run_while_producing(
            spark, args.bootstrap, topic, args.rate, args.seconds, list(seen.values())
        )
    stop.set()
    for watcher in watchers:
        watcher.join(10)
    naive.close()
    spark.stop()
    sidecar.stop()

    table = Table(
        f"same query, same events: {len(progresses)} progress events, 4 partitions, "
        f"{args.rate:.0f} records/s, 1 s trigger",
        "listener", "events", "Spark-side p50 / p99 / mean ms",
        "batch end -> committed p50 / p99 / mean ms", "batches seen committed",
        cpu=("service", "spark", "broker", "bench"),
    )  # fmt: skip
    for name, listener in (("naive synchronous commit", naive), ("ours", ours)):
        cost = percentiles([s * 1000 for s in listener.samples])
        key = "naive" if listener is naive else "ours"
        latencies = [
            (seen[key][p["batchId"]] - batch_end(p)) * 1000
            for p in progresses
            if p["batchId"] in seen[key] and p["numInputRows"] > 0
        ]
        lat = percentiles(latencies) if latencies else (float("nan"),) * 3
        table.add(
            name, len(listener.samples), f"{cost[0]:.2f} / {cost[1]:.2f} / {cost[2]:.2f}",
            f"{lat[0]:.1f} / {lat[1]:.1f} / {lat[2]:.1f}", len(latencies), meter=meter,
        )  # fmt: skip
    table.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
