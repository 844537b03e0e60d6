"""The point of the product, on real components: once the sidecar commits, lag tools see the
group. Burrow (Debian's package) reports it OK with zero lag; the admin client shows it as
kafka-consumer-groups.sh does; the sidecar's own status, kafka_exporter-named metrics and
JSON logs agree. Plus the log-end reader on the real broker.

Debian's Burrow 1.2.1 cannot read Kafka 4 (scripts/local-burrow.sh says why), so its test
runs a Kafka 3.9.1 broker (KRaft, Maven Central jars) of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from harness import kafka_broker
from harness.machine import ROOT, free_port
from harness.service_process import ServiceProcess
from spark_offset_sidecar.adapters.kafka.log_ends import KafkaLogEndReader
from spark_offset_sidecar.core.offsets import TopicPartition
from tests.support.cli import describe_group
from tests.support.kafka import create_topics, run_sync, unique_group
from tests.support.service import metric, spark_progress, wait_for

pytestmark = pytest.mark.kafka

LEGACY_KAFKA = "3.9.1"
BURROW = ROOT / "scripts" / "local-burrow.sh"


async def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for partition, count in per_partition.items():
            for i in range(count):
                await producer.send(topic, f"record {i}".encode(), partition=partition)
        await producer.flush()
    finally:
        await producer.stop()


@pytest.fixture
def legacy_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka_broker.LocalBroker]:
    port = free_port()
    state = tmp_path_factory.mktemp("kafka39")
    broker = kafka_broker.LocalBroker(
        f"127.0.0.1:{port}",
        port,
        state,
        started_here=True,
        extra_env=(("LOCAL_KAFKA_VERSION", LEGACY_KAFKA),),
    )
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def burrow(legacy_broker: kafka_broker.LocalBroker, tmp_path: Path) -> Iterator[str]:
    if shutil.which("Burrow") is None:
        pytest.fail("Burrow is not installed: run scripts/install-system-deps.sh")
    env = {
        **os.environ,
        "LOCAL_BURROW_DIR": str(tmp_path / "burrow"),
        "LOCAL_BURROW_PORT": str(free_port()),
    }
    url = subprocess.run(
        [str(BURROW), "start", legacy_broker.bootstrap],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    yield url
    subprocess.run([str(BURROW), "stop"], env=env, check=False)


def burrow_status(url: str, group: str) -> Any:
    answer = httpx.get(f"{url}/v3/kafka/local/consumer/{group}/status", timeout=5)
    return answer.json().get("status") if answer.status_code == 200 else None


def test_burrow_and_the_admin_client_see_the_group_ok_with_zero_lag(
    legacy_broker: kafka_broker.LocalBroker, burrow: str, tmp_path: Path
) -> None:
    bootstrap = legacy_broker.bootstrap
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    run_sync(create_topics(bootstrap, [topic], 2))
    run_sync(produce(bootstrap, topic, {0: 30, 1: 30}))
    # Burrow drops commits to topics it does not know yet (it learns topics every 10 s).
    wait_for(
        lambda: topic in httpx.get(f"{burrow}/v3/kafka/local/topic", timeout=5).json()["topics"],
        timeout=60,
        what="Burrow to know the topic",
    )
    group = unique_group("spark-job")
    query = str(uuid.uuid4())
    service = ServiceProcess(
        tmp_path, bootstrap, export_kafka_lag="true", lag_read_interval_seconds=1
    ).start()
    try:
        # A job catching up: every batch commits further, the last one reaches the log end.
        for batch, done in enumerate([6, 12, 18, 24, 30]):
            offsets = {topic: {"0": done, "1": done}}
            answer = service.post_progress(group, spark_progress(batch, offsets, query=query))
            assert answer.status_code == 200, answer.text
            wait_for(
                lambda b=batch: (
                    (service.query(query).get("committed") or {}).get("checkpoint_id") == b
                ),
                what=f"commit of batch {batch}",
            )
            time.sleep(1.1)  # Burrow keeps commits at least min-distance (1 s) apart

        seen = wait_for(
            lambda: (
                (s := burrow_status(burrow, group))
                and s["status"] == "OK"
                and s["totallag"] == 0
                and s["partition_count"] == 2
                and s
            ),
            timeout=60,
            what="Burrow's OK with zero lag",
        )
        print("Burrow:", json.dumps(seen, sort_keys=True))

        rows = describe_group(bootstrap, group)
        print(rows)
        assert [(r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
            (topic, "0", "30", "30", "0"),
            (topic, "1", "30", "30", "0"),
        ]

        own = wait_for(
            lambda: (s := service.http.get(f"/v1/status/{group}").json())["totallag"] == 0 and s,
            what="the sidecar's own status",
        )
        assert (own["status"], own["query_id"], own["partition_count"]) == ("OK", query, 2)
        text = service.metrics()
        assert metric(text, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 0
        assert metric(text, "sidecar_consumergroup_status", consumergroup=group, status="OK") == 1
    finally:
        service.stop()

    lines = [json.loads(line) for line in service.log.read_text().splitlines() if line.strip()]
    commits = [
        line for line in lines if line.get("group_id") == group and "committed" in line["message"]
    ]
    assert [line["checkpoint_id"] for line in commits] == [0, 1, 2, 3, 4]
    assert {line["query_id"] for line in commits} == {query}
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)


def test_log_ends_on_the_real_broker_name_a_topic_that_cannot_be_read(
    kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = new_topic(partitions=2)
    run_sync(produce(kafka_bootstrap, topic, {0: 3, 1: 5}))
    reader = KafkaLogEndReader({"bootstrap_servers": kafka_bootstrap}, timeout=3)

    async def read(*tps: TopicPartition) -> Any:
        try:
            return await reader.log_ends(tps)
        finally:
            await reader.close()

    both = run_sync(read(TopicPartition(topic, 0), TopicPartition(topic, 1)))
    assert both.ends == {TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 5}
    missing = f"gone-{uuid.uuid4().hex[:8]}"
    partly = run_sync(read(TopicPartition(topic, 1), TopicPartition(missing, 0)))
    assert partly.ends == {TopicPartition(topic, 1): 5}
    assert partly.failed_topics == (missing,)
