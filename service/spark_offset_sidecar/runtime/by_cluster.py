"""Several Kafka clusters: each cluster's Kafka ports behind one port each, routed by the
group's cluster (ledger R14; docs/run/clusters.md, "One cluster's trouble is its own").
The default cluster is keyed None, as the ledger keeps it; a cluster the settings no
longer name is refused with a reason that names it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

from spark_offset_sidecar.core.ledger.changes import CommitRequest
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import CommitError, KafkaReadError
from spark_offset_sidecar.ports.kafka import (
    Committed,
    CommittedOffsetsReader,
    OffsetCommitter,
    StartingOffsets,
    StartingOffsetsReader,
)

T = TypeVar("T")
# The cluster of a group, as the ledger keeps it (None: the default cluster).
GroupCluster = Callable[[str], str | None]


def _named(cluster: str | None) -> str:
    return "the default cluster" if cluster is None else f"Kafka cluster {cluster!r}"


def _of(by_cluster: Mapping[str | None, T], cluster: str | None, error: type[Exception]) -> T:
    found = by_cluster.get(cluster)
    if found is None:
        raise error(f"{_named(cluster)} is not in the settings (SIDECAR_KAFKA_CLUSTERS)")
    return found


class ClusterCommitters:
    """``OffsetCommitter``: each commit by its cluster's committer."""

    def __init__(self, by_cluster: Mapping[str | None, OffsetCommitter]) -> None:
        self.by_cluster = dict(by_cluster)

    async def commit(self, request: CommitRequest) -> None:
        await _of(self.by_cluster, request.cluster, CommitError).commit(request)

    def waiting(self, group_id: str) -> str | None:
        for committer in self.by_cluster.values():
            if (why := committer.waiting(group_id)) is not None:
                return why
        return None

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.by_cluster.values()))


class _ByGroup(Generic[T]):
    """Each cluster's ``T``, looked up by a group's cluster."""

    def __init__(self, by_cluster: Mapping[str | None, T], cluster_of: GroupCluster) -> None:
        self.by_cluster, self.cluster_of = dict(by_cluster), cluster_of

    def of_group(self, group_id: str) -> T:
        return _of(self.by_cluster, self.cluster_of(group_id), KafkaReadError)


class ClusterCommittedReaders(_ByGroup[CommittedOffsetsReader]):
    """``CommittedOffsetsReader``: a group's offsets read from its cluster."""

    async def committed(self, group_id: str) -> dict[TopicPartition, Committed]:
        return await self.of_group(group_id).committed(group_id)

    async def close(self) -> None:
        await asyncio.gather(*(r.close() for r in self.by_cluster.values()))


class ClusterStartingOffsets(_ByGroup[StartingOffsetsReader]):
    """``StartingOffsetsReader``: a group's starting offsets read from its cluster."""

    async def __call__(self, group_id: str, topics: Sequence[str]) -> StartingOffsets:
        return await self.of_group(group_id)(group_id, topics)
