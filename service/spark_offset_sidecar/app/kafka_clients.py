"""Each Kafka cluster's client options, made once (every client of a cluster shares its
token provider), and the readers the watcher builds on them: one of each kind per cluster
(``ports.kafka.KafkaReading``). The clients that commit are the
service's alone (``app.kafka_commits``): the watcher imports none of them.

Clusters are keyed as the ledger keeps them: None is the default cluster
(``SIDECAR_KAFKA_*``), a name each other one (``SIDECAR_CLUSTER_<NAME>_KAFKA_*``). The
clients built last are kept (``log_end_readers``, ``committers``): the requests they sent
again are read from them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol

from spark_offset_sidecar.adapters.kafka.log_ends import KafkaLogEndReader
from spark_offset_sidecar.adapters.kafka.options import kafka_client_options
from spark_offset_sidecar.adapters.kafka.record_times import KafkaRecordTimeReader
from spark_offset_sidecar.ports.kafka import Cluster, LogEndReader, Problem, RecordTimeReader
from spark_offset_sidecar.runtime.own_loop import RecordTimesOnOwnLoop
from spark_offset_sidecar.settings import Settings

if TYPE_CHECKING:  # the committers are the service's alone (``app.kafka_commits``)
    from spark_offset_sidecar.adapters.kafka.committer import KafkaOffsetCommitter


class SaysProblem(Protocol):
    @property
    def problem(self) -> str | None: ...


def problem_of(what: str, source: SaysProblem) -> Problem:
    """``source``'s problem, when it has one, as ``/readyz`` says it: "what: problem"."""
    return lambda: (problem := source.problem) and f"{what}: {problem}"


class KafkaClients:
    def __init__(self, settings: Settings) -> None:
        self.clusters = clusters = settings.clusters.choice()
        self.timeout = settings.commits.commit_timeout_seconds
        self.read_record_times = settings.status.read_record_times
        self.options = {
            clusters.stored(name): kafka_client_options(settings.for_cluster(name), self.timeout)
            for name in clusters.names
        }
        self.several = len(self.options) > 1
        # The clients built last: each counts its requests sent again (``resent``).
        self.log_end_readers: dict[Cluster, KafkaLogEndReader] = {}
        self.committers: dict[Cluster, KafkaOffsetCommitter] = {}  # built by kafka_commits

    def said(self, key: Cluster, what: str) -> str:
        """``what`` naming the cluster when there are several: "Kafka (eu) token"."""
        if not self.several:
            return what
        return what.replace("Kafka", f"Kafka ({self.clusters.name_of(key)})", 1)

    def token_problems(self) -> list[Problem]:
        """Each OAUTHBEARER cluster's token provider's problem, for ``/readyz``."""
        return [
            problem_of(self.said(key, "Kafka token"), provider)
            for key, options in self.options.items()
            if (provider := options.get("sasl_oauth_token_provider")) is not None
        ]

    def log_ends(self) -> dict[Cluster, LogEndReader]:
        self.log_end_readers = {
            key: KafkaLogEndReader(options, timeout=self.timeout)
            for key, options in self.options.items()
        }
        return dict(self.log_end_readers)

    def record_times(self) -> dict[Cluster, RecordTimeReader]:
        """Read on their own loop (aiokafka parses the fetched records off the events'),
        when ``read_record_times``."""
        return {
            key: RecordTimesOnOwnLoop(
                KafkaRecordTimeReader(options, timeout=self.timeout),
                f"record times {key or 'default'}",
            )
            for key, options in self.options.items()
            if self.read_record_times
        }

    def resent(self) -> dict[Cluster, Callable[[], int]]:
        return {key: partial(self._resent, key) for key in self.options}

    def _resent(self, key: Cluster) -> int:
        kinds = (self.log_end_readers, self.committers)
        return sum(clients[key].resent for clients in kinds if key in clients)
