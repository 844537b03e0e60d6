"""The ports towards Kafka: what the loops and the HTTP layer need, with no third-party
import. The real adapters implement them with aiokafka (``adapters.kafka.committer``,
``adapters.kafka.log_ends``, ``adapters.kafka.starting_offsets``); ``testing`` has the
in-memory doubles. ``KafkaReading`` and ``KafkaCommitting``: what a process builds on
Kafka, per cluster, once a lifespan (``app.kafka_clients``; ``testing.MemoryKafka``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from spark_offset_sidecar.core.ledger.changes import CommitRequest
from spark_offset_sidecar.core.offsets import TopicPartition


class OffsetCommitter(Protocol):
    async def commit(self, request: CommitRequest) -> None:
        """Commit ``request.offsets`` for ``request.group_id`` or raise ``CommitError``."""

    def waiting(self, group_id: str) -> str | None:
        """Why a commit of the group in flight has no answer yet, in one sentence, when the
        committer knows (its coordinator cannot be reached); else None. Cheap: read on
        every status of the group."""

    async def close(self) -> None: ...


@dataclass(frozen=True)
class LogEnds:
    """Where each partition's log ends, and where it starts (its oldest record not yet
    deleted by retention or DeleteRecords): a partition is in both or in neither."""

    ends: dict[TopicPartition, int]
    failed_topics: tuple[str, ...] = ()
    starts: dict[TopicPartition, int] = field(default_factory=dict)


class LogEndReader(Protocol):
    async def log_ends(self, partitions: Collection[TopicPartition]) -> LogEnds:
        """The log end and start of each partition; raises ``KafkaReadError`` when no
        topic could be read at all."""

    async def close(self) -> None: ...


class RecordTimeReader(Protocol):
    async def record_times(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, float | None]:
        """The timestamp (Unix seconds; CreateTime or LogAppendTime, as the topic keeps
        it) of the first record at or after each offset; None where no record follows it
        (a transaction marker at the log end). A partition that could not be read is left
        out; raises ``KafkaReadError`` when none could be."""

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Committed:
    """One partition's committed offset in Kafka, with the metadata its committer wrote."""

    offset: int
    metadata: str


class CommittedOffsetsReader(Protocol):
    async def committed(self, group_id: str) -> dict[TopicPartition, Committed]:
        """Every offset Kafka holds for the group; raises ``KafkaReadError``."""

    async def close(self) -> None: ...


@dataclass(frozen=True)
class StartingOffsets:
    """Where a group's committed offsets stand, in the form Spark's ``startingOffsets``
    takes."""

    group_id: str
    offsets: dict[str, dict[str, int]]  # Spark's form: topic -> partition -> offset or -2
    uncommitted: list[str]  # "topic/partition" started at earliest: nothing committed there

    def spark_option(self) -> str:
        """The value for ``.option("startingOffsets", ...)``."""
        return json.dumps(self.offsets, separators=(",", ":"), sort_keys=True)


class StartingOffsetsReader(Protocol):
    async def __call__(self, group_id: str, topics: Sequence[str]) -> StartingOffsets:
        """Read the group's committed offsets from Kafka; raises ``KafkaReadError`` or
        ``OffsetsNotFound``."""


Cluster = str | None  # a Kafka cluster as the ledger keeps it (None: the default one)
GroupCluster = Callable[[str], Cluster]  # the cluster a group's commits go to
Problem = Callable[[], str | None]  # an identity's problem now, as /readyz says it, or None


class KafkaReading(Protocol):
    """The clients a process reads Kafka with, by cluster, built anew at each start (the
    caller closes them), and the problems of the clusters' tokens."""

    def log_ends(self) -> dict[Cluster, LogEndReader]: ...
    def record_times(self) -> dict[Cluster, RecordTimeReader]: ...  # none: times not read
    def resent(self) -> dict[Cluster, Callable[[], int]]: ...  # by the clients built last
    def token_problems(self) -> list[Problem]: ...


class KafkaCommitting(KafkaReading, Protocol):
    """Those of the process taking events: its committers besides. ``committer``: the one
    the commit loop sees (each group's commits to its cluster's); ``committer_problems``:
    Kafka refusing a cluster's credentials (to the committers built last);
    ``committed_reader``: what a group's commits are in Kafka, a takeover's check (None:
    a double committer never wrote to Kafka)."""

    def committer(self, replica_id: str | None) -> OffsetCommitter: ...
    def committer_problems(self) -> list[Problem]: ...
    def starting_offsets(self, group_cluster: GroupCluster) -> StartingOffsetsReader: ...
    def committed_reader(self, group_cluster: GroupCluster) -> CommittedOffsetsReader | None: ...
