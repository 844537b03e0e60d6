"""The service's settings: ``SIDECAR_*`` environment variables, in sections (pydantic
models), each the input of the part of the service it names (docs/development.md)."""

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
