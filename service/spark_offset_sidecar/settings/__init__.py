"""The service's settings: ``SIDECAR_*`` environment variables, in sections (pydantic
models), each the input of the part of the service it names.

- ``values``: the kinds of value: pydantic's types, and the checks pydantic has none for.
- ``section``: what every section shares: reading its variables, naming refusals.
- ``sections``: the sections (Kafka, clusters, database, HTTP, auth, OIDC, commits,
  status, metrics, followed folders, replicas, logs).
- ``service_settings``: ``Settings``, all of them, and the checks that span sections.
"""

from spark_offset_sidecar.settings.sections import (
    AuthSettings,
    ClusterSettings,
    CommitSettings,
    DatabaseSettings,
    FollowSettings,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    MetricsSettings,
    OidcSettings,
    ReplicaSettings,
    StatusSettings,
)
from spark_offset_sidecar.settings.service_settings import Settings
from spark_offset_sidecar.settings.values import MAX_COMMIT_INTERVAL

__all__ = [
    "MAX_COMMIT_INTERVAL",
    "AuthSettings",
    "ClusterSettings",
    "CommitSettings",
    "DatabaseSettings",
    "FollowSettings",
    "HttpSettings",
    "KafkaSettings",
    "LogSettings",
    "MetricsSettings",
    "OidcSettings",
    "ReplicaSettings",
    "Settings",
    "StatusSettings",
]
