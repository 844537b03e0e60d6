"""When each Spark batch ends and when its offsets show committed in Kafka, for the
benchmarks that time one from the other (``follow_latency``, ``peers``).

A real streaming query (Spark's Kafka connector, a 1-second trigger) reads a topic that a
producer fills continuously (``run_while_producing``). A poller reads a group's committed
offsets from the broker every 5 ms and notes when each batch id (from the commit
metadata) first appears there (``watch_commits``). Batch end = the progress's timestamp
(trigger start) + its ``triggerExecution`` duration (``batch_end``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import produce_in_background


def watch_commits(
    bootstrap: str, group: str, seen: dict[int, float], stop: threading.Event
) -> threading.Thread:
    async def poll() -> None:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            while not stop.is_set():
                try:
                    committed = await admin.list_consumer_group_offsets(group)
                except Exception:
                    committed = {}
                now = time.time()
                for meta in committed.values():
                    if meta.metadata:
                        seen.setdefault(json.loads(meta.metadata)["batch_id"], now)
                await asyncio.sleep(0.005)
        finally:
            await admin.close()

    thread = threading.Thread(target=lambda: asyncio.run(poll()), daemon=True)
    thread.start()
    return thread


def batch_end(progress: dict[str, object]) -> float:
    started = datetime.fromisoformat(str(progress["timestamp"]).replace("Z", "+00:00"))
    durations = progress["durationMs"]
    assert isinstance(durations, dict)
    return started.timestamp() + durations["triggerExecution"] / 1000


def started_query(spark: Any, bootstrap: str, topic: str, checkpoint: str) -> Any:
    """A query on ``topic`` from its end (1-second trigger, noop sink), once its first batch
    ran: its starting offsets are then fixed, and every record produced after is read (a
    producer started before could finish before a slow start fixed them)."""
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    deadline = time.monotonic() + 120
    while query.lastProgress is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"the query on {topic} ran no batch in 120 s")
        time.sleep(0.1)
    return query


def run_while_producing(
    spark: Any,
    bootstrap: str,
    topic: str,
    rate: float,
    seconds: float,
    seen: Sequence[dict[int, float]],
) -> list[dict[str, Any]]:
    """A query on ``topic`` (1-second trigger, noop sink) while a producer writes ``rate``
    records/s for ``seconds``; then, once each of ``seen`` (batches seen committed, by
    ``watch_commits``) holds the newest batch with records, its progress events."""
    with tempfile.TemporaryDirectory() as work:
        query = started_query(spark, bootstrap, topic, f"{work}/checkpoint")
        producer = produce_in_background(bootstrap, topic, rate, seconds)
        producer.join()
        progresses = wait_committed(query, seen)
        query.stop()
    return progresses


def wait_committed(
    query: Any, seen: Sequence[dict[int, float]], timeout: float = 120.0
) -> list[dict[str, Any]]:
    """The query's progress events once each of ``seen`` holds a batch at or past its
    newest batch with records, or at ``timeout`` (the tables then show what was seen):
    a condition, not a guess of how fast the machine is."""
    deadline = time.monotonic() + timeout
    while True:
        progresses = list(query.recentProgress)
        newest = max((p["batchId"] for p in progresses if p["numInputRows"] > 0), default=None)
        done = newest is not None and all(
            any(batch >= newest for batch in list(batches)) for batches in seen
        )
        if done or time.monotonic() > deadline:
            return progresses
        time.sleep(0.2)
