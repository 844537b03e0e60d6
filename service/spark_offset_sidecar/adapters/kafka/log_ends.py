"""Read the brokers' log-end offsets: aiokafka's implementation of the ``LogEndReader`` port.

Topic metadata is asked with auto-creation off (``wire``: the consumer's ``end_offsets``
would create a deleted topic again), then ListOffsets(latest) and (earliest) go to each
partition's leader over one shared ``wire.Client``. A topic that does not exist, or a
partition without a leader, is reported in ``LogEnds.failed_topics``, the others intact."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import Any

from aiokafka.errors import KafkaConnectionError, KafkaError

from spark_offset_sidecar.adapters.kafka.wire import RESENDS, Client, Offsets
from spark_offset_sidecar.core.offsets import TopicPartition, shared_partition
from spark_offset_sidecar.errors import KafkaReadError
from spark_offset_sidecar.ports.kafka import LogEnds

LATEST = -1  # ListOffsets timestamp meaning "the log end"
EARLIEST = -2  # ... and "the log start"


class KafkaLogEndReader:
    """One client, started on first use and kept."""

    def __init__(self, client_options: Mapping[str, Any], *, timeout: float) -> None:
        """``client_options``: aiokafka's connection keywords (``kafka_client_options``)."""
        self.client_options = dict(client_options)
        self.timeout = timeout
        self._client: Client | None = None
        self.resent = 0  # reads sent again after the broker closed their connection

    async def log_ends(self, partitions: Collection[TopicPartition]) -> LogEnds:
        if not partitions:
            return LogEnds({})
        try:
            async with asyncio.timeout(self.timeout):
                for resends in range(RESENDS, -1, -1):
                    try:
                        latest, earliest, failed = await self._read(partitions)
                        break
                    except KafkaConnectionError:
                        # A connection the broker closed under the request (an expired
                        # OAUTHBEARER token): again, on new connections.
                        if not resends:
                            raise
                        await self.close()
                        self.resent += 1
        except (KafkaError, TimeoutError, OSError) as exc:
            await self.close()  # a broken client is not reused
            raise KafkaReadError(f"reading log-end offsets failed: {exc!r}") from exc
        ends = _offsets_of(latest, failed)
        starts = _offsets_of(earliest, failed)
        both = ends.keys() & starts.keys()
        failed.update(tp.topic for tp in ends.keys() ^ starts.keys())
        return LogEnds(
            {tp: ends[tp] for tp in both},
            tuple(sorted(failed)),
            {tp: starts[tp] for tp in both},
        )

    async def _read(
        self, partitions: Collection[TopicPartition]
    ) -> tuple[list[Offsets], list[Offsets], set[str]]:
        """The ListOffsets answers (latest, earliest) and the topics without a leader."""
        client = await self._started()
        leaders, failed = partition_leaders(await client.metadata({tp.topic for tp in partitions}))
        by_leader: defaultdict[int, defaultdict[str, list[int]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for tp in partitions:
            leader = leaders.get(tp)
            if leader is None or leader < 0:
                failed.add(tp.topic)
            else:
                by_leader[leader][tp.topic].append(tp.partition)
        # One request per leader and end: a ListOffsets names a partition once.
        latest, earliest = await asyncio.gather(
            self._offsets(client, by_leader, LATEST),
            self._offsets(client, by_leader, EARLIEST),
        )
        return latest, earliest, failed

    @staticmethod
    async def _offsets(
        client: Client, by_leader: Mapping[int, Mapping[str, list[int]]], timestamp: int
    ) -> list[Offsets]:
        return await asyncio.gather(
            *(
                client.list_offsets(leader, topics, timestamp)
                for leader, topics in by_leader.items()
            )
        )

    async def _started(self) -> Client:
        if self._client is None:
            self._client = await Client.started(self.client_options, int(self.timeout * 1000))
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def _offsets_of(answers: list[Offsets], failed: set[str]) -> dict[TopicPartition, int]:
    """The offsets in ListOffsets answers; the topics of partitions in error go to
    ``failed``."""
    found: dict[TopicPartition, int] = {}
    for answer in answers:
        for topic, rows in answer:
            for partition, error_code, offset in rows:
                if error_code == 0:
                    found[shared_partition(topic, partition)] = offset
                else:
                    failed.add(topic)
    return found


def partition_leaders(topics: list[Any]) -> tuple[dict[TopicPartition, int], set[str]]:
    """Each partition's leader (-1: none now), and the topics Kafka answered with an
    error (unknown, not authorized, ...), from ``wire``'s topic metadata (which never
    creates a topic: a read of ``?topic=typo`` must not make ``typo`` in a shared cluster)."""
    leaders: dict[TopicPartition, int] = {}
    failed: set[str] = set()
    for topic in topics:
        name = topic["topic"]
        if topic["error_code"] != 0:
            failed.add(name)
            continue
        for partition in topic["partitions"]:
            leaders[TopicPartition(name, partition["partition"])] = partition["leader"]
    return leaders, failed
