"""Kafka as the tests' ground truth: topics, records, and a group's committed offsets read
back from the broker (what every lag tool reads)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.support.service import wait_for

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync or async test code alike."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def create_topics(
    bootstrap: str, names: list[str], partitions: int, replicas: int = 1, **config: str
) -> None:
    """Create the topics (with topic ``config``, e.g. ``retention.ms``) and return once the
    broker's metadata has every partition: the controller accepts a topic before the
    broker knows it, and a commit to a partition it does not know yet fails with
    UNKNOWN_TOPIC_OR_PARTITION."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=partitions,
                    replication_factor=replicas,
                    topic_configs=config,
                )
                for name in names
            ]
        )
        for _ in range(200):
            described = await admin.describe_topics(names)
            if all(t["error_code"] == 0 and len(t["partitions"]) == partitions for t in described):
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the broker's metadata did not show {names} within 10 s")
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for i in range(start, start + count):
            await producer.send(topic, f"{topic}-{i}".encode(), key=str(i).encode())
        await producer.flush()
    finally:
        await producer.stop()


async def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """DeleteRecords: the partition's log start moves to ``before``."""
    from aiokafka import TopicPartition as KafkaTopicPartition
    from aiokafka.admin import RecordsToDelete

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_records({KafkaTopicPartition(topic, partition): RecordsToDelete(before)})
    finally:
        await admin.close()


def unique_group(prefix: str = "g") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def read_committed(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The group's committed offsets and metadata, as the broker reports them. A brand-new
    broker answers COORDINATOR_NOT_AVAILABLE until its ``__consumer_offsets`` is created
    and loaded (the first FindCoordinator creates it): asked again for up to 60 s."""
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    deadline = asyncio.get_running_loop().time() + 60
    try:
        while True:
            try:
                found = await admin.list_consumer_group_offsets(group)
                break
            except KafkaError as error:
                if not error.retriable or asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): (meta.offset, meta.metadata) for tp, meta in found.items()}


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    return {tp: offset for tp, (offset, _) in run_sync(read_committed(bootstrap, group)).items()}


async def read_log_ends(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """The brokers' log-end offsets of every partition of ``topics``."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        cluster = await consumer._client.fetch_all_metadata()
        partitions = [
            TopicPartition(topic, p)
            for topic in topics
            for p in sorted(cluster.partitions_for_topic(topic) or ())
        ]
        ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    return {(tp.topic, tp.partition): offset for tp, offset in ends.items()}


def log_ends(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    return run_sync(read_log_ends(bootstrap, topics))


def wait_for_committed(
    bootstrap: str, groups: Iterable[str], want: dict[tuple[str, int], int]
) -> None:
    """Wait until each of ``groups`` has exactly ``want`` committed in Kafka."""
    for group in groups:
        wait_for(
            lambda g=group: committed_offsets(bootstrap, g) == want,  # type: ignore[misc]
            what=f"{group}'s offsets in Kafka",
        )
