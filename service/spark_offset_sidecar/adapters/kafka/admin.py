"""Reads of a consumer group from Kafka with the admin client: its coordinator, its
committed offsets, its state and members, its topics' partitions. Shared by
``group_report`` and ``starting_offsets``, so that every read takes the same care:

- A brand-new broker answers COORDINATOR_NOT_AVAILABLE, then COORDINATOR_LOAD_IN_PROGRESS,
  for seconds while it creates ``__consumer_offsets``: such answers (and NOT_COORDINATOR)
  are asked again with backoff until ``wait_seconds`` have passed.
- A top-level OffsetFetch error is an error, never an empty group (``wire.committed``).

Every failure is a ``KafkaReadError`` saying "... from Kafka failed: <why>".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import (
    GroupCoordinatorNotAvailableError,
    GroupLoadInProgressError,
    KafkaConnectionError,
    KafkaError,
    NotCoordinatorForGroupError,
)

from spark_offset_sidecar.adapters.kafka import wire
from spark_offset_sidecar.adapters.kafka.log_ends import partition_leaders
from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import KafkaReadError
from spark_offset_sidecar.ports.kafka import Committed

T = TypeVar("T")
# Answers that mean "ask again": the coordinator is being created, is loading, or moved.
NOT_YET: tuple[type[KafkaError], ...] = (
    GroupCoordinatorNotAvailableError,
    GroupLoadInProgressError,
    NotCoordinatorForGroupError,
)
NOT_YET_BACKOFF = Backoff(initial=0.1, cap=1.0)


@dataclass(frozen=True)
class GroupDescription:
    state: str  # Kafka's word: Empty, Stable, Dead, ...
    members: int


class GroupAdmin:
    """An admin client for reading groups, as an async context manager. ``wait_seconds``
    bounds how long a group read waits for its coordinator: three request timeouts, which
    covers a new broker creating ``__consumer_offsets``."""

    def __init__(self, client_options: Mapping[str, Any], *, request_timeout: float) -> None:
        """``client_options``: aiokafka's connection keywords (``kafka_client_options``)."""
        self.request_timeout = request_timeout
        self.wait_seconds = 3 * request_timeout
        self._admin = AIOKafkaAdminClient(
            **client_options, request_timeout_ms=int(request_timeout * 1000)
        )

    async def __aenter__(self) -> GroupAdmin:
        try:
            async with asyncio.timeout(self.request_timeout):
                await self._admin.start()
        except (KafkaError, TimeoutError, OSError) as exc:
            await self._close()
            raise KafkaReadError(f"reading from Kafka failed: cannot reach it ({exc!r})") from exc
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        with contextlib.suppress(Exception):
            await self._admin.close()

    async def committed(self, group_id: str) -> dict[TopicPartition, Committed]:
        """Every offset the group committed (OffsetFetch for all partitions)."""

        async def fetch(node: int) -> dict[TopicPartition, Committed]:
            found: dict[TopicPartition, Committed] = {}
            for topic, partitions in await wire.committed(self._admin, node, group_id):
                for partition, offset, metadata in partitions:
                    if offset >= 0:
                        found[TopicPartition(topic, partition)] = Committed(offset, metadata or "")
            return found

        return await self._on_coordinator(group_id, "reading the committed offsets of", fetch)

    async def describe(self, group_id: str) -> GroupDescription:
        """The group's state and number of members (DescribeGroups)."""

        async def ask(node: int) -> GroupDescription:
            state, members = await wire.describe_group(self._admin, node, group_id)
            return GroupDescription(state or "Empty", members)

        return await self._on_coordinator(group_id, "describing", ask)

    async def partitions(self, topics: Sequence[str]) -> dict[str, list[int]]:
        """Each topic's partition ids; a topic Kafka does not know has none."""
        if not topics:
            return {}
        try:
            async with asyncio.timeout(self.wait_seconds):
                answer = await wire.topic_metadata(self._admin, topics)
        except (KafkaError, TimeoutError, OSError) as exc:
            raise KafkaReadError(
                f"describing topics {list(topics)} from Kafka failed: {exc!r}"
            ) from exc
        found: dict[str, list[int]] = {topic: [] for topic in topics}
        for tp in sorted(partition_leaders(answer)[0]):
            found[tp.topic].append(tp.partition)
        return found

    async def _on_coordinator(
        self, group_id: str, what: str, request: Callable[[int], Awaitable[T]]
    ) -> T:
        """``request(coordinator node)``, asked again while Kafka answers "not yet", until
        ``wait_seconds`` have passed."""
        failed = f"{what} group {group_id!r} from Kafka failed"
        deadline = time.monotonic() + self.wait_seconds
        not_yet = 0  # answers so far
        resends = wire.RESENDS
        while True:
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    return await request(await self._admin.find_coordinator(group_id))
            except KafkaConnectionError as exc:
                # Closed under the request (an expired OAUTHBEARER token): again, anew.
                if not resends:
                    raise KafkaReadError(f"{failed}: {exc!r}") from exc
                resends -= 1
            except NOT_YET as exc:
                not_yet += 1
                backoff = NOT_YET_BACKOFF.delay(not_yet)
                if time.monotonic() + backoff >= deadline:
                    raise KafkaReadError(
                        f"{failed}: its coordinator was not available within "
                        f"{self.wait_seconds:g} s (Kafka kept answering {type(exc).__name__}; "
                        "a new broker creates __consumer_offsets first); try again"
                    ) from exc
                await asyncio.sleep(backoff)
            except TimeoutError as exc:
                raise KafkaReadError(f"{failed}: no answer within {self.wait_seconds:g} s") from exc
            except (KafkaError, OSError) as exc:
                raise KafkaReadError(f"{failed}: {exc!r}") from exc


class KafkaCommittedReader:
    """The ``CommittedOffsetsReader`` port: a group's committed offsets, read through a
    ``GroupAdmin`` opened for each read (reads are rare: after a takeover)."""

    def __init__(self, client_options: Mapping[str, Any], *, request_timeout: float) -> None:
        self._options = client_options
        self._request_timeout = request_timeout

    async def committed(self, group_id: str) -> dict[TopicPartition, Committed]:
        async with GroupAdmin(self._options, request_timeout=self._request_timeout) as admin:
            return await admin.committed(group_id)

    async def close(self) -> None:
        pass
