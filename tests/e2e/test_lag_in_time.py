"""Lag in time and data at risk against the truth, on a real broker (issue 38).

The truth is the broker's: the timestamp of the record at the committed offset, read back
with a plain consumer (CreateTime: what the producer set; LogAppendTime: what the broker
set), and the log start after DeleteRecords or retention. The service is the real
process (``offset-sidecar serve``), reading the log ends every second.

  - an old backlog (records stamped ten minutes ago, older than any history): the time
    lag comes from one read of the record, exact;
  - records produced while the service watches: the time lag is interpolated in the
    log-end history, within one read interval of the truth, with no read of a record;
  - a restart of the service in the middle: the next time lag is right again (no NaN, no
    jump), the history being gone;
  - records deleted by DeleteRecords and by a short retention before the job read them:
    LOST with the count, counted once, then OK once the job moves past.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTopicPartition

from harness.service_process import ServiceProcess
from tests.support.kafka import create_topics, delete_records, run_sync, unique_group
from tests.support.service import metric, metric_sum, spark_progress, wait_for

pytestmark = pytest.mark.kafka

INTERVAL = 1.0  # the service's lag read interval here
TOLERANCE = max(1.0, INTERVAL)  # the accuracy the service promises


@pytest.fixture
def service(tmp_path: Path, kafka_bootstrap: str) -> Iterator[ServiceProcess]:
    process = ServiceProcess(tmp_path, kafka_bootstrap, lag_read_interval_seconds=INTERVAL)
    process.start()
    yield process
    process.stop()


async def produce(bootstrap: str, topic: str, count: int, *, stamp: float | None = None) -> None:
    """``count`` records; ``stamp``: the CreateTime of the first (then one a second)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(count):
            ms = None if stamp is None else int((stamp + i) * 1000)
            await producer.send_and_wait(topic, f"r{i}".encode(), partition=0, timestamp_ms=ms)
    finally:
        await producer.stop()


async def produce_steadily(bootstrap: str, topic: str, seconds: float, per_second: int) -> None:
    """Records stamped as they are sent, at a steady pace (a live producer)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await producer.send_and_wait(topic, b"live", partition=0)
            await asyncio.sleep(1 / per_second)
    finally:
        await producer.stop()


async def timestamp_at(bootstrap: str, topic: str, offset: int) -> float:
    """The truth: the timestamp of the record at ``offset``, read back."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = KafkaTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        record = await consumer.getone()
        assert record.offset == offset
        return float(record.timestamp) / 1000
    finally:
        await consumer.stop()


def commit(
    service: ServiceProcess, group: str, query: str, batch: int, topic: str, at: int
) -> None:
    answer = service.post_progress(group, spark_progress(batch, {topic: {"0": at}}, query=query))
    assert answer.status_code == 200, answer.text


def status(service: ServiceProcess, group: str) -> Any:
    return service.http.get(f"/v1/status/{group}").json()


def time_lag_of(service: ServiceProcess, group: str, offset: int) -> tuple[float, float]:
    """The service's time lag of ``group`` once it judges the commit at ``offset``, and
    when it was evaluated."""

    def judged() -> Any:
        view = status(service, group)
        p = view.get("partitions") or [{}]
        if p[0].get("current_offset") == offset and view.get("lag_seconds") is not None:
            return view
        return None

    view = wait_for(judged, timeout=30, what=f"a time lag at offset {offset}")
    return view["lag_seconds"], view["evaluated_at"]


def record_reads(service: ServiceProcess) -> float:
    return metric(service.metrics(), "sidecar_record_time_partitions_total") or 0.0


@pytest.mark.parametrize("timestamps", ["CreateTime", "LogAppendTime"])
def test_time_lag_is_the_age_of_the_oldest_unprocessed_record(
    service: ServiceProcess, kafka_bootstrap: str, tmp_path: Path, timestamps: str
) -> None:
    topic = f"time-{timestamps.lower()}-{unique_group()}"
    run_sync(create_topics(kafka_bootstrap, [topic], 1, **{"message.timestamp.type": timestamps}))
    group, query = unique_group("lag"), unique_group("q")
    # 1. An old backlog: older than any history, so the record is read once.
    run_sync(produce(kafka_bootstrap, topic, 20, stamp=time.time() - 600))
    truth = run_sync(timestamp_at(kafka_bootstrap, topic, 5))
    commit(service, group, query, 1, topic, 5)
    seconds, evaluated = time_lag_of(service, group, 5)
    print(f"{timestamps} read from Kafka: {seconds:.3f} s, truth {evaluated - truth:.3f} s")
    assert abs(seconds - (evaluated - truth)) <= TOLERANCE, (seconds, evaluated - truth)
    if timestamps == "CreateTime":
        assert seconds > 590  # the producer's time, not when the broker got it
    reads = record_reads(service)
    assert reads == 1

    # The same record, later: its age grows with the clock (the producer is idle).
    def later_one() -> tuple[float, float] | None:
        found = time_lag_of(service, group, 5)
        return found if found[1] > evaluated + 2 else None

    later, evaluated_later = wait_for(later_one, what="a later evaluation")
    assert abs(later - (evaluated_later - truth)) <= TOLERANCE
    assert record_reads(service) == reads, "read once while the committed offset stays"

    # 2. Records produced while the service reads the log ends: interpolated, not read.
    run_sync(produce_steadily(kafka_bootstrap, topic, seconds=8, per_second=10))
    ends = metric_sum(service.metrics(), "sidecar_log_end_reads_total")
    wait_for(  # the reads after the last record
        lambda: metric_sum(service.metrics(), "sidecar_log_end_reads_total") >= ends + 2,
        what="two reads of the log ends after the last record",
    )
    live = 20 + 40  # a record of the fourth second of the live ones
    truth = run_sync(timestamp_at(kafka_bootstrap, topic, live))
    commit(service, group, query, 2, topic, live)
    seconds, evaluated = time_lag_of(service, group, live)
    print(f"{timestamps} from the history: {seconds:.3f} s, truth {evaluated - truth:.3f} s")
    assert abs(seconds - (evaluated - truth)) <= TOLERANCE, (seconds, evaluated - truth)
    assert record_reads(service) == reads, "placed by the history, no read of the record"

    # 3. A restart: the history is gone; the next time lag reads the record, right again.
    service.stop()
    service.start()
    seconds, evaluated = time_lag_of(service, group, live)
    print(f"{timestamps} after a restart: {seconds:.3f} s, truth {evaluated - truth:.3f} s")
    assert abs(seconds - (evaluated - truth)) <= TOLERANCE, (seconds, evaluated - truth)
    assert record_reads(service) == 1

    # 4. Caught up: 0 s.
    commit(service, group, query, 3, topic, run_sync(_log_end(kafka_bootstrap, topic)))
    wait_for(lambda: status(service, group)["lag_seconds"] == 0.0, what="0 s caught up")


async def _log_end(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tp = KafkaTopicPartition(topic, 0)
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()


def test_records_deleted_before_the_job_read_them_are_lost_and_counted_once(
    service: ServiceProcess, kafka_bootstrap: str
) -> None:
    # DeleteRecords: the log start jumps past the committed offset.
    topic = f"deleted-{unique_group()}"
    run_sync(create_topics(kafka_bootstrap, [topic], 1))
    run_sync(produce(kafka_bootstrap, topic, 100))
    group, query = unique_group("lost"), unique_group("q")
    commit(service, group, query, 1, topic, 10)
    wait_for(
        lambda: (status(service, group).get("partitions") or [{}])[0].get("log_start_offset") == 0,
        what="a first read of the log start",
    )
    run_sync(delete_records(kafka_bootstrap, topic, 0, 60))

    def lost() -> Any:
        view = status(service, group)
        return view if view.get("data_status") == "LOST" and view["messages_lost"] else None

    view = wait_for(lost, what="LOST, counted")
    assert view["messages_lost"] == 50
    assert view["partitions"][0]["log_start_offset"] == 60
    reads = "sidecar_log_end_reads_total"
    before = metric_sum(service.metrics(), reads)
    wait_for(  # more reads of the log start: still counted once
        lambda: metric_sum(service.metrics(), reads) >= before + 3, what="three more reads"
    )
    text = service.metrics()
    assert metric(text, "sidecar_consumergroup_messages_lost_total", consumergroup=group) == 50
    assert (
        metric(text, "sidecar_consumergroup_data_status", consumergroup=group, status="LOST") == 1
    )
    commit(service, group, query, 2, topic, 70)  # the job skips the gap (failOnDataLoss=false)
    # No longer LOST; AT_RISK it may be (the log start just jumped by 60 records).
    wait_for(lambda: status(service, group).get("data_status") != "LOST", what="not LOST")
    assert status(service, group)["messages_lost"] == 50

    # A short retention: the broker deletes a rolled segment the job had not read.
    short = f"retained-{unique_group()}"
    run_sync(
        create_topics(kafka_bootstrap, [short], 1, **{"retention.ms": "2000", "segment.ms": "500"})
    )
    run_sync(produce(kafka_bootstrap, short, 30))
    group2, query2 = unique_group("lost"), unique_group("q")
    commit(service, group2, query2, 1, short, 0)

    def deleted() -> Any:
        run_sync(produce(kafka_bootstrap, short, 1))  # rolls the segment once it is old
        view = status(service, group2)
        return view if view.get("data_status") == "LOST" and view["messages_lost"] else None

    view = wait_for(deleted, timeout=60, what="retention to delete records")
    start = view["partitions"][0]["log_start_offset"]
    assert start >= 30
    assert view["messages_lost"] == start
