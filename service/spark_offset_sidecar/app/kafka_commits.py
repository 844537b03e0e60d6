"""The Kafka clients only the process taking events builds on each cluster's options
(``app.kafka_clients``; ``ports.kafka.KafkaCommitting``): the committers, the starting
offsets' reader and, with replicas, the reader of what was committed (a takeover's check).
One of each kind per cluster, or the one of the default cluster when there is only it.
The committers built last are kept: Kafka refusing a cluster's credentials is read from
them (``committer_problems``)."""

from __future__ import annotations

from functools import partial

from spark_offset_sidecar.adapters.kafka.admin import KafkaCommittedReader
from spark_offset_sidecar.adapters.kafka.committer import KafkaOffsetCommitter
from spark_offset_sidecar.adapters.kafka.starting_offsets import starting_offsets
from spark_offset_sidecar.app.kafka_clients import KafkaClients, problem_of
from spark_offset_sidecar.ports.kafka import (
    Cluster,
    CommittedOffsetsReader,
    GroupCluster,
    OffsetCommitter,
    Problem,
    StartingOffsetsReader,
)
from spark_offset_sidecar.runtime.by_cluster import (
    ClusterCommittedReaders,
    ClusterCommitters,
    ClusterStartingOffsets,
)


class CommittingClients(KafkaClients):
    def starting_offsets(self, group_cluster: GroupCluster) -> StartingOffsetsReader:
        readers = {
            key: partial(starting_offsets, options, request_timeout=self.timeout)
            for key, options in self.options.items()
        }
        return ClusterStartingOffsets(readers, group_cluster) if self.several else readers[None]

    def committer(self, replica_id: str | None) -> OffsetCommitter:
        self.committers = committers = {
            key: KafkaOffsetCommitter(options, timeout=self.timeout, replica_id=replica_id)
            for key, options in self.options.items()
        }
        return ClusterCommitters(committers) if self.several else committers[None]

    def committer_problems(self) -> list[Problem]:
        return [partial(self._committer_problem, key) for key in self.options]

    def _committer_problem(self, key: Cluster) -> str | None:
        committer = self.committers.get(key)
        return problem_of(self.said(key, "Kafka"), committer)() if committer is not None else None

    def committed_reader(self, group_cluster: GroupCluster) -> CommittedOffsetsReader:
        readers = {
            key: KafkaCommittedReader(options, request_timeout=self.timeout)
            for key, options in self.options.items()
        }
        return ClusterCommittedReaders(readers, group_cluster) if self.several else readers[None]
