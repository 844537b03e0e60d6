"""In-memory doubles of the service's ports, for tests of the pure core and of the HTTP
layer (``create_app(settings, store=..., committer=..., log_ends=...)``). None of them is
evidence that the system works with Kafka or a database: the real adapters are tested
against a real broker and real databases.

- ``InMemoryStore``      a ``LedgerStore`` (``ports.store``) that keeps nothing
- ``InMemoryCommitter``  an ``OffsetCommitter`` (``ports.kafka``) that records commits, and
                         the ``CommittedOffsetsReader`` of what it (or the test) committed
- ``InMemoryLogEnds``    a ``LogEndReader`` (``ports.kafka``) with log ends set by the test
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from spark_offset_sidecar.core.changes import Change, CommitRequest
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import CommitError, KafkaReadError
from spark_offset_sidecar.ports.kafka import Committed, LogEnds
from spark_offset_sidecar.ports.store import StoredState


class InMemoryStore:
    """Records what it was given; survives nothing. For tests of the pure core."""

    def __init__(self) -> None:
        self.persisted: list[Change] = []
        self.fail_with: Exception | None = None

    def load(self) -> StoredState:
        return StoredState()

    def persist(self, changes: Sequence[Change]) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.persisted.extend(changes)

    def check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def close(self) -> None:
        pass


class InMemoryCommitter:
    """Records commits; can be told to fail or to hold commits until released."""

    def __init__(self) -> None:
        self.commits: list[CommitRequest] = []
        self.fail_with: CommitError | None = None
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_flight = 0
        self.max_in_flight = 0

    async def commit(self, request: CommitRequest) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            if self.fail_with is not None:
                raise self.fail_with
            self.commits.append(request)
        finally:
            self.in_flight -= 1

    async def committed(self, group_id: str) -> dict[TopicPartition, Committed]:
        """What Kafka would hold for ``group_id``: the recorded commits, the last one per
        partition winning (a test may append a late one)."""
        held: dict[TopicPartition, Committed] = {}
        for request in self.commits:
            if request.group_id == group_id:
                held.update({tp: Committed(o, "") for tp, o in request.offsets.items()})
        return held

    async def close(self) -> None:
        self.gate.set()


@dataclass
class InMemoryLogEnds:
    """Log ends set by the test; ``fail_with`` makes every read fail."""

    ends: dict[TopicPartition, int] = field(default_factory=dict)
    fail_with: KafkaReadError | None = None
    reads: int = 0

    async def log_ends(self, partitions: Collection[TopicPartition]) -> LogEnds:
        self.reads += 1
        if self.fail_with is not None:
            raise self.fail_with
        known = {tp: self.ends[tp] for tp in partitions if tp in self.ends}
        missing = sorted({tp.topic for tp in partitions if tp not in self.ends})
        return LogEnds(known, tuple(missing))

    async def close(self) -> None:
        return None
