"""The Kafka committer on the real broker: exact offsets with metadata for many groups
over a fixed set of connections, and a clear error for a group with members."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaConsumer

from spark_offset_sidecar.adapters.kafka.committer import KafkaOffsetCommitter
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import GroupHasMembers
from tests.support.kafka import read_committed, run_sync, unique_group


def request(group: str, topic: str, batch: int, partitions: int = 2) -> CommitRequest:
    offsets = {TopicPartition(topic, p): batch * 10 + p for p in range(partitions)}
    checkpoint = Checkpoint(f"q-{group}", group, batch, "run", offsets, time.time())
    return CommitRequest(checkpoint, offsets, attempt=1, held_back=(), rewind=False)


def test_many_groups_share_a_fixed_set_of_connections(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    groups = [unique_group("lanes") for _ in range(40)]

    async def scenario() -> int:
        committer = KafkaOffsetCommitter(
            {"bootstrap_servers": kafka_bootstrap}, timeout=10, lanes=4
        )
        try:
            for batch in (1, 2):
                await asyncio.gather(*(committer.commit(request(g, topic, batch)) for g in groups))
            return committer.connections()
        finally:
            await committer.close()

    assert run_sync(scenario()) <= 4, "connections do not grow with the number of groups"
    for group in groups[:5]:
        committed = run_sync(read_committed(kafka_bootstrap, group))
        assert {tp: offset for tp, (offset, _) in committed.items()} == {
            (topic, 0): 20,
            (topic, 1): 21,
        }
        metadata = json.loads(next(iter(committed.values()))[1])
        assert metadata == {
            "committer": "spark-offset-sidecar",
            "query_id": f"q-{group}",
            "batch_id": 2,
        }


def test_a_group_with_a_member_is_refused_with_the_reason(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(1), unique_group("member")

    async def scenario() -> None:
        member = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group)
        await member.start()
        committer = KafkaOffsetCommitter({"bootstrap_servers": kafka_bootstrap}, timeout=10)
        try:
            await member.getmany(timeout_ms=3000)  # joined, partitions assigned
            with pytest.raises(GroupHasMembers, match="active members"):
                await committer.commit(request(group, topic, 1, partitions=1))
        finally:
            await committer.close()
            await member.stop()

    run_sync(scenario())


def test_a_coordinator_the_metadata_does_not_list_yet_is_reached_where_kafka_names_it(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """In a rolling restart the groups move to a broker that has just come back (its
    preferred leadership) before the client's metadata lists it again (a refresh may go to
    the broker shutting down next and wait for its socket to close): the commit goes to the
    address the coordinator look-up named, not after a refresh."""
    topic, group = new_topic(1), unique_group("back")

    async def scenario() -> None:
        committer = KafkaOffsetCommitter({"bootstrap_servers": kafka_bootstrap}, timeout=3)
        try:
            await committer.commit(request(group, topic, 1, partitions=1))
            client = committer._client
            assert client is not None
            # The coordinator moved (looked up again, on a new lane connection) to a broker
            # the metadata does not list, and no refresh lists it yet.
            committer._coordinators.clear()
            for connection in committer._connections.values():
                connection.close()
            client.broker = lambda _node: None  # type: ignore[method-assign]
            client.refresh = lambda: None  # type: ignore[method-assign]
            await committer.commit(request(group, topic, 2, partitions=1))
        finally:
            await committer.close()

    run_sync(scenario())
    committed = run_sync(read_committed(kafka_bootstrap, group))
    assert {tp: offset for tp, (offset, _) in committed.items()} == {(topic, 0): 20}
