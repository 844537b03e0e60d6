"""Read the brokers' log-end offsets: aiokafka's implementation of the ``LogEndReader`` port
(``ports.kafka``; the in-memory double is ``testing.InMemoryLogEnds``).

``KafkaLogEndReader`` asks for the topics' metadata with auto-creation off
(``topic_metadata``: the consumer's ``end_offsets`` would create a deleted topic again),
then sends ListOffsets(latest) and ListOffsets(earliest) to each partition's leader, over one shared
``AIOKafkaClient`` (checked on the broker by tests/e2e/test_lag_tools.py). A topic that
does not exist, or a partition without a leader, is reported in ``LogEnds.failed_topics``
and leaves the other topics' answers intact."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.protocol.offset import OffsetRequest

from spark_offset_sidecar.adapters.kafka.oauth import RESENDS
from spark_offset_sidecar.adapters.kafka.topic_metadata import metadata_request, partition_leaders
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
        self._client: AIOKafkaClient | None = None
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
    ) -> tuple[list[Any], list[Any], set[str]]:
        """The ListOffsets answers (latest, earliest) and the topics without a leader."""
        client = await self._started()
        leaders, failed = await self._leaders(client, {tp.topic for tp in partitions})
        by_leader: defaultdict[int, defaultdict[str, list[tuple[int, int]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for tp in partitions:
            leader = leaders.get(tp)
            if leader is None or leader < 0:
                failed.add(tp.topic)
            else:
                by_leader[leader][tp.topic].append((tp.partition, LATEST))
        # One request per leader and end: a ListOffsets names a partition once.
        latest, earliest = await asyncio.gather(
            self._offsets(client, by_leader, LATEST),
            self._offsets(client, by_leader, EARLIEST),
        )
        return latest, earliest, failed

    @staticmethod
    async def _offsets(
        client: AIOKafkaClient,
        by_leader: Mapping[int, Mapping[str, list[tuple[int, int]]]],
        timestamp: int,
    ) -> list[Any]:
        return await asyncio.gather(
            *(
                client.send(
                    leader,
                    OffsetRequest(
                        -1,
                        0,
                        [(t, [(p, timestamp) for p, _ in rows]) for t, rows in topics.items()],
                    ),
                )
                for leader, topics in by_leader.items()
            )
        )

    async def _leaders(
        self, client: AIOKafkaClient, topics: set[str]
    ) -> tuple[dict[TopicPartition, int], set[str]]:
        return partition_leaders(
            await client.send(client.get_random_node(), metadata_request(topics))
        )

    async def _started(self) -> AIOKafkaClient:
        if self._client is None:
            client = AIOKafkaClient(
                **self.client_options, request_timeout_ms=int(self.timeout * 1000)
            )
            try:
                await client.bootstrap()
            except BaseException:
                with contextlib.suppress(Exception):
                    await client.close()
                raise
            self._client = client
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


def _offsets_of(answers: list[Any], failed: set[str]) -> dict[TopicPartition, int]:
    """The offsets in ListOffsets answers; the topics of partitions in error go to
    ``failed``."""
    found: dict[TopicPartition, int] = {}
    for answer in answers:
        for topic, rows in answer.topics:
            for partition, error_code, *rest in rows:
                if error_code == 0:
                    found[shared_partition(topic, partition)] = rest[-1]
                else:
                    failed.add(topic)
    return found
