"""The catch-up estimate against the truth, on a real PySpark job (issue 38).

A backlog of 3,000 records and a producer adding ~20 a second; the job reads at most 100
records a batch (``maxOffsetsPerTrigger``), a batch a second, so it catches up in about
40 s. While it does, the service's estimate (``catch_up.eta_seconds``: lag / (consume rate
- produce rate) over its last reads) is taken at every read; once the group's lag is 0,
the estimates are compared with when that happened. The later estimates (the second half
of the run) must be within max(5 s, 20 %) of the truth: the estimate converges. Caught
up means no more than two seconds of arrivals left (they keep coming; the lag is rarely
exactly 0 at a read).
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from harness.service_process import ServiceProcess
from spark_offset_listener.listener import OffsetCommitListener
from tests.support.kafka import produce, run_sync, unique_group
from tests.support.service import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BACKLOG = 3000
PER_BATCH = 100
ARRIVING = 20  # records a second while the job catches up


def keep_producing(bootstrap: str, topic: str, stop: threading.Event) -> threading.Thread:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            while not stop.is_set():
                await producer.send_and_wait(topic, b"late", partition=0)
                await asyncio.sleep(1 / ARRIVING)
        finally:
            await producer.stop()

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    return thread


def test_the_catch_up_estimate_of_a_job_held_back_by_max_offsets_per_trigger_converges(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(1)
    run_sync(produce(kafka_bootstrap, topic, BACKLOG))
    group = unique_group("catch-up")
    service = ServiceProcess(tmp_path, kafka_bootstrap, lag_read_interval_seconds=1).start()
    listener = OffsetCommitListener(service.url, group_id=group, flush_timeout=2.0, timeout=2.0)
    spark.streams.addListener(listener)
    stop = threading.Event()
    producer = keep_producing(kafka_bootstrap, topic, stop)
    query = None
    try:
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(PER_BATCH))
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )
        estimates: list[tuple[float, float]] = []  # (when, estimated end)
        jobs: list[dict[str, Any]] = []

        def caught_up() -> bool:
            view = service.http.get(f"/v1/status/{group}").json()
            catch_up = view.get("catch_up") or {}
            if catch_up.get("job"):
                jobs.append(catch_up["job"])
            if catch_up.get("state") == "catching_up" and catch_up.get("eta_seconds"):
                at = view["evaluated_at"]
                if not estimates or estimates[-1][0] != at:
                    estimates.append((at, at + catch_up["eta_seconds"]))
            # Caught up: no more than about a second of arrivals left (they keep coming).
            lag = view.get("totallag")
            return bool(view.get("partitions")) and lag is not None and lag <= 2 * ARRIVING

        started = time.time()
        wait_for(caught_up, timeout=240, what="the job to catch up")
        truth = time.time()
        stop.set()
        later = [end for at, end in estimates if at >= started + (truth - started) / 2]
        assert len(later) >= 5, estimates
        errors = [abs(end - truth) for end in later]
        allowed = max(5.0, 0.2 * (truth - started))
        first = [abs(end - truth) for at, end in estimates if at < started + (truth - started) / 2]
        print(
            f"caught up in {truth - started:.1f} s; estimates off by: first half median "
            f"{statistics.median(first) if first else float('nan'):.1f} s, second half median "
            f"{statistics.median(errors):.1f} s, max {max(errors):.1f} s"
        )
        assert statistics.median(errors) <= allowed, (truth - started, estimates)
        # The job's own figures came with it (from its progress events).
        assert jobs
        assert jobs[-1]["processed_rows_per_second"] is not None
    finally:
        stop.set()
        if query is not None:
            query.stop()
        spark.streams.removeListener(listener)
        listener.sender.close(0.5)
        producer.join(10)
        service.stop()
