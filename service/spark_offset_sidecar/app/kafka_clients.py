"""Each Kafka cluster's client options, made once (every client of a cluster shares its
token provider), and the readers both the service and its watcher build on them: one of
each kind per cluster. The clients that commit are the service's alone
(``app.kafka_commits``): the watcher imports none of them.

Clusters are keyed as the ledger keeps them: None is the default cluster
(``SIDECAR_KAFKA_*``), a name each other one (``SIDECAR_CLUSTER_<NAME>_KAFKA_*``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from spark_offset_sidecar.adapters.kafka.log_ends import KafkaLogEndReader
from spark_offset_sidecar.adapters.kafka.options import kafka_client_options
from spark_offset_sidecar.adapters.kafka.record_times import KafkaRecordTimeReader
from spark_offset_sidecar.settings import Settings

Key = str | None  # a cluster as the ledger keeps it
GroupCluster = Callable[[str], Key]  # the cluster a group's commits go to


class SaysProblem(Protocol):
    @property
    def problem(self) -> str | None: ...


def problem_of(what: str, source: SaysProblem) -> Callable[[], str | None]:
    """``source``'s problem, when it has one, as ``/readyz`` says it: "what: problem"."""
    return lambda: (problem := source.problem) and f"{what}: {problem}"


class KafkaClients:
    def __init__(self, settings: Settings) -> None:
        self.clusters = clusters = settings.clusters.choice()
        self.timeout = settings.commits.commit_timeout_seconds
        self.options = {
            clusters.stored(name): kafka_client_options(settings.for_cluster(name), self.timeout)
            for name in clusters.names
        }
        self.several = len(self.options) > 1

    def said(self, key: Key, what: str) -> str:
        """``what`` naming the cluster when there are several: "Kafka (eu) token"."""
        if not self.several:
            return what
        return what.replace("Kafka", f"Kafka ({self.clusters.name_of(key)})", 1)

    def token_problems(self) -> list[Callable[[], str | None]]:
        """Each OAUTHBEARER cluster's token provider's problem, for ``/readyz``."""
        return [
            problem_of(self.said(key, "Kafka token"), provider)
            for key, options in self.options.items()
            if (provider := options.get("sasl_oauth_token_provider")) is not None
        ]

    def log_ends(self) -> dict[Key, KafkaLogEndReader]:
        return {
            key: KafkaLogEndReader(options, timeout=self.timeout)
            for key, options in self.options.items()
        }

    def record_times(self) -> dict[Key, KafkaRecordTimeReader]:
        return {
            key: KafkaRecordTimeReader(options, timeout=self.timeout)
            for key, options in self.options.items()
        }
