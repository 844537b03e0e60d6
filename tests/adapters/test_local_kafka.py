"""The real broker that every integration test stands on, and the script that runs it."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from harness.kafka_broker import SCRIPT, answers
from harness.machine import free_port
from tests.support.kafka import unique_group

pytestmark = pytest.mark.kafka


def _script(command: str, port: int, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOCAL_KAFKA_PORT": str(port), "LOCAL_KAFKA_DIR": str(state)}
    return subprocess.run(
        [str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=180
    )


def _broker_pids(state: Path) -> list[str]:
    found = subprocess.run(
        ["pgrep", "-f", f"{state}/server.properties"], capture_output=True, text=True
    )
    return found.stdout.split()


def test_second_broker_runs_beside_the_first_and_stop_leaves_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    port = free_port()
    state = tmp_path / "kafka"

    started = _script("start", port, state)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == f"127.0.0.1:{port}"
    again = _script("start", port, state)  # idempotent
    assert again.returncode == 0, again.stderr
    assert len(_broker_pids(state)) == 1
    assert answers(f"127.0.0.1:{port}")
    assert answers(kafka_bootstrap), "the session's broker must be untouched"
    assert _script("status", port, state).returncode == 0

    stopped = _script("stop", port, state)
    assert stopped.returncode == 0, stopped.stderr
    assert _broker_pids(state) == []
    assert not answers(f"127.0.0.1:{port}")
    assert _script("status", port, state).returncode == 3
    assert answers(kafka_bootstrap)


async def test_commit_without_membership_reads_back_through_admin(
    kafka_bootstrap: str, new_topic: object
) -> None:
    topic = new_topic(3)  # type: ignore[operator]
    group = unique_group()
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign(tps)
        consumer.pause(*tps)
        await consumer.commit({tps[0]: (7, "q1/b3"), tps[1]: 0, tps[2]: 2**40})
    finally:
        await consumer.stop()

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    assert {tp: meta.offset for tp, meta in committed.items()} == {
        tps[0]: 7,
        tps[1]: 0,
        tps[2]: 2**40,
    }
    assert committed[tps[0]].metadata == "q1/b3"


@pytest.mark.spark
def test_pyspark_reads_a_thousand_records_through_the_kafka_connector(
    kafka_bootstrap: str, new_topic: object, spark: object
) -> None:
    topic = new_topic(4)  # type: ignore[operator]
    sent = [f"record-{i}" for i in range(1000)]

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=5)
        await producer.start()
        try:
            batch = [producer.send(topic, value.encode()) for value in sent]
            await asyncio.gather(*batch)
        finally:
            await producer.stop()

    asyncio.run(produce())
    rows = (
        spark.read.format("kafka")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "partition")
        .collect()
    )
    assert sorted(row.value for row in rows) == sorted(sent)
    assert {row.partition for row in rows} == {0, 1, 2, 3}


def test_kcat_lists_the_broker(kafka_bootstrap: str) -> None:
    listed = subprocess.run(
        ["kcat", "-b", kafka_bootstrap, "-L", "-m", "10"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert listed.returncode == 0, listed.stderr
    assert f"broker 1 at {kafka_bootstrap}" in listed.stdout


def test_a_broker_that_cannot_start_says_why(tmp_path: Path) -> None:
    """What CI shows of a failed start is the script's reason and the broker's log."""
    from harness.kafka_broker import BrokerDidNotStart, LocalBroker

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = LocalBroker(f"127.0.0.1:{port}", port, tmp_path / "k", started_here=True)
        with pytest.raises(BrokerDidNotStart, match=f"port {port} is in use by another program"):
            broker.start()
