"""The service's settings: its sections, and the checks that span sections.

Read once from ``SIDECAR_*`` variables (``Settings.from_env``); an unknown ``SIDECAR_``
variable is refused (a typo would otherwise be ignored), Kubernetes' service links are
left out (docs/run/service.md). Each of ``clusters.more`` has its own ``KafkaSettings``
in ``more_kafka``; a setting not given for a cluster takes its default, never another
cluster's value (credentials never cross clusters).
"""

from __future__ import annotations

import difflib
import ipaddress
import os
from collections.abc import Collection, Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from spark_offset_sidecar.errors import ConfigError
from spark_offset_sidecar.settings.section import PREFIX, Section
from spark_offset_sidecar.settings.sections import (
    AWS_REGIONS,
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
from spark_offset_sidecar.settings.service_links import service_links


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    clusters: ClusterSettings = Field(default_factory=ClusterSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    oidc: OidcSettings = Field(default_factory=OidcSettings)
    commits: CommitSettings = Field(default_factory=CommitSettings)
    status: StatusSettings = Field(default_factory=StatusSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    follow: FollowSettings = Field(default_factory=FollowSettings)
    replicas: ReplicaSettings = Field(default_factory=ReplicaSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    # Each of clusters.more's Kafka, by name; a cluster not here takes KafkaSettings' defaults.
    more_kafka: Mapping[str, KafkaSettings] = Field(default_factory=dict)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, only: Collection[str] | None = None
    ) -> Settings:
        """The settings ``environ``'s ``SIDECAR_*`` variables give (the process's by default);
        the one reader of the process's environment. With ``only`` (section names), for a
        command that serves nothing: only those sections (and ``clusters``) are read, and
        the checks across sections, which are about serving, are not made."""
        environ = os.environ if environ is None else environ
        links = set(service_links(environ))
        given = {k: v for k, v in environ.items() if k.startswith(PREFIX) and k not in links}
        clusters = ClusterSettings.from_environ(given)
        _refuse_unknown(given, clusters)
        given |= {name: environ[name] for name in AWS_REGIONS if name in environ}
        read: dict[str, Any] = {"clusters": clusters}
        if only is None or "kafka" in only:
            read["more_kafka"] = {
                name: KafkaSettings.from_environ(given, ClusterSettings.kafka_prefix(name))
                for name in clusters.more
            }
        for name, section in cls.sections().items():
            if name != "clusters" and (only is None or name in only):
                read[name] = section.from_environ(given)
        return cls.model_validate(read) if only is None else cls.model_construct(**read)

    @classmethod
    def sections(cls) -> dict[str, type[Section]]:
        """Every section's class, by its field's name, in the reference's order."""
        return {
            name: spec.annotation
            for name, spec in cls.model_fields.items()
            if isinstance(spec.annotation, type) and issubclass(spec.annotation, Section)
        }

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        """(variable, default, meaning) of every setting, for ``--help`` and the manual."""
        return [row for section in cls.sections().values() for row in section.describe()]

    @classmethod
    def variables(cls) -> frozenset[str]:
        """Every variable a service reads (those of more clusters aside)."""
        return frozenset(v for s in cls.sections().values() for v in s.variables().values())

    def for_cluster(self, name: str) -> KafkaSettings:
        """How to reach cluster ``name``: what its Kafka adapters are built from."""
        if name == self.clusters.name:
            return self.kafka
        if name not in self.clusters.more:
            raise KeyError(name)
        return self.more_kafka.get(name) or KafkaSettings()

    @model_validator(mode="after")
    def _checks_across_sections(self) -> Self:
        self._check_listening()
        self._check_replicas()
        if self.oidc.enabled and not self.auth.tokens_file:
            raise ConfigError(
                AuthSettings.variable("tokens_file"),
                'SIDECAR_OIDC_ISSUER grants by the "identities" of the tokens file: give one',
            )
        unnamed = sorted(set(self.more_kafka) - set(self.clusters.more))
        if unnamed:
            raise ConfigError(
                ClusterSettings.variable("more"),
                f"does not name {unnamed[0]!r}, which has Kafka settings",
            )
        return self

    def _check_listening(self) -> None:
        http, auth = self.http, self.auth
        if not auth.tokens_file and not auth.allow_unauthenticated and not is_loopback(http.host):
            raise ConfigError(
                http.variable("host"),
                f"listening on {http.host} without SIDECAR_TOKENS_FILE lets anyone who reaches "
                "it move consumer offsets; configure tokens, or set "
                "SIDECAR_ALLOW_UNAUTHENTICATED=true to accept that",
            )

    def _check_replicas(self) -> None:
        if not self.replicas.replicated:
            return
        if not self.database.url.startswith("postgresql"):
            raise ConfigError(
                self.database.variable("url"),
                "SIDECAR_REPLICATED=true needs a postgresql:// URL: replicas share one database",
            )
        timeout = self.commits.commit_timeout_seconds
        if self.replicas.lease_seconds < 3 * timeout:
            raise ConfigError(
                self.replicas.variable("lease_seconds"),
                f"must be at least 3 x SIDECAR_COMMIT_TIMEOUT_SECONDS ({3 * timeout:g}): a "
                "replica stops starting commits two commit timeouts before its lease ends",
            )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (or pod) only: localhost, 127.0.0.0/8, ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# Settings of earlier releases, refused by name with the release that removed them.
_SHAPES = "0.2.0: serve always runs its watcher and writer as children (docs/run/processes.md)"
REMOVED = {
    name: _SHAPES
    for name in (
        "SIDECAR_WATCHER",
        "SIDECAR_WATCHER_URL",
        "SIDECAR_WATCHER_TOKEN_FILE",
        "SIDECAR_WATCHER_ADVERTISED_URL",
        "SIDECAR_DATABASE_WRITER",
        "SIDECAR_GIL_SWITCH_INTERVAL_SECONDS",
        "SIDECAR_GC_THAW_SECONDS",
    )
}


def _refuse_unknown(environ: Mapping[str, str], clusters: ClusterSettings) -> None:
    """Refuse the first unknown ``SIDECAR_*`` variable, with the setting it may stand for."""
    known = set(Settings.variables())
    for name in clusters.more:
        known.update(KafkaSettings.variables(ClusterSettings.kafka_prefix(name)).values())
    unknown = sorted(set(environ) - known)
    if not unknown:
        return
    first, *more = unknown
    problem = "unknown setting"
    if first in REMOVED:
        problem += f" (removed in {REMOVED[first]})"
    stems = {name.removeprefix(PREFIX): name for name in known}
    close = difflib.get_close_matches(first.removeprefix(PREFIX), stems, 1)
    if close:
        problem += f" (did you mean {stems[close[0]]}?)"
    if first.startswith("SIDECAR_CLUSTER_"):
        problem += (
            "; a cluster's settings are SIDECAR_CLUSTER_<NAME>_KAFKA_* for a name of "
            "SIDECAR_KAFKA_CLUSTERS"
        )
    if more:
        problem += f"; also unknown: {', '.join(more)}"
    raise ConfigError(first, f"{problem}; offset-sidecar settings lists every setting")
