"""The sections of the settings, each what one part of the service is built from.
Variables kept the names they had before there were sections: a field whose variable
does not have its section's prefix says it by its alias."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from pydantic import Field, model_validator

from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.errors import ConfigError, install_extra
from spark_offset_sidecar.settings.section import Section
from spark_offset_sidecar.settings.values import (
    Bootstrap,
    ClusterByGroup,
    ClusterName,
    ClusterNames,
    CommitInterval,
    DatabaseUrl,
    Extensions,
    Flag,
    Granularity,
    HttpUrl,
    LogFormat,
    LogLevel,
    NonNegativeFloat,
    Patterns,
    Port,
    PositiveFloat,
    PositiveInt,
    ReadableFile,
    SaslMechanism,
    SecurityProtocol,
    SomePatterns,
    StatusWindow,
    StorageOptions,
    Text,
    default_database_url,
)

# Seconds, not uvicorn's 5 (docs/decisions.md, "Idle connections kept 620 s").
KEEP_ALIVE_SECONDS = 620
# AWS's own variables, in the order its SDKs read them: a Kafka section's region's default.
AWS_REGIONS = ("AWS_REGION", "AWS_DEFAULT_REGION")


class HttpSettings(Section):
    title = "HTTP: where the service listens and what a request may hold"

    host: Text = Field("127.0.0.1", description="address to listen on")
    port: Port = Field(8000, description="port to listen on")
    tls_certfile: ReadableFile | None = Field(None, description="serve HTTPS with this certificate")
    tls_keyfile: ReadableFile | None = Field(None, description="and this private key")
    max_body_bytes: PositiveInt = Field(
        1_048_576, description="largest request body; larger requests are answered 413"
    )
    max_partitions_per_event: PositiveInt = Field(
        10_000, description="partitions in one event; larger events are answered 422"
    )
    max_topics_per_event: PositiveInt = Field(
        100, description="topics in one event; larger events are answered 422"
    )
    keep_alive_seconds: PositiveInt = Field(
        KEEP_ALIVE_SECONDS,
        description="how long an idle keep-alive connection is kept open: longer than the "
        "idle timeout of the clients and proxies in front (Go's 90 s, AWS load balancers' 60 "
        "s, Google Cloud's 610 s), so that they close an idle connection first; one closed "
        "here while a request is on its way fails that request (connection reset)",
    )

    @model_validator(mode="after")
    def _tls_in_pairs(self) -> Self:
        if bool(self.tls_certfile) != bool(self.tls_keyfile):
            raise ConfigError(self.variable("tls_keyfile"), "HTTPS needs both certificate and key")
        return self


class AuthSettings(Section):
    title = "Who may call: tokens (docs/secure/index.md)"

    tokens_file: ReadableFile | None = Field(
        None, description="JSON file of bearer tokens and their grants (docs/secure/index.md)"
    )
    protect_reads: Flag = Field(
        True,
        description="with tokens, GET /v1/* and /ui need a token with read (/metrics, /livez "
        "and /readyz stay open)",
    )
    allow_unauthenticated: Flag = Field(
        False, description="allow listening beyond loopback without tokens"
    )


class OidcSettings(Section):
    prefix = "SIDECAR_OIDC_"
    title = "Jobs' workload identity (OIDC)"

    issuer: HttpUrl | None = Field(
        None, description="accept jobs' JWTs of this issuer (their iss), e.g. the cluster's"
    )
    audience: Text | None = Field(
        None,
        description="the audience (aud) those tokens must be for, e.g. spark-offset-sidecar",
    )
    jwks_url: HttpUrl | None = Field(
        None, description="the issuer's keys (default: jwks_uri of its discovery document)"
    )
    ca_file: ReadableFile | None = Field(
        None, description="CA bundle for the issuer's HTTPS (a cluster's own CA)"
    )
    bearer_token_file: ReadableFile | None = Field(
        None,
        description="a token sent to the issuer to fetch its keys (a Kubernetes API server "
        "asks for one)",
    )
    jwks_refresh_seconds: PositiveFloat = Field(
        300.0, description="fetch the issuer's keys again this often"
    )

    @property
    def enabled(self) -> bool:
        return bool(self.issuer and self.audience)

    @model_validator(mode="after")
    def _issuer_and_audience(self) -> Self:
        if not self.issuer and not self.audience:
            for name in ("jwks_url", "ca_file", "bearer_token_file"):
                if getattr(self, name):
                    raise ConfigError(self.variable(name), "needs SIDECAR_OIDC_ISSUER")
            return self
        if not self.issuer or not self.audience:
            missing = "audience" if self.issuer else "issuer"
            raise ConfigError(
                self.variable(missing), "jobs' JWTs are checked by issuer and audience: give both"
            )
        _needs("jwt", "oidc", self.variable("issuer"), "jobs' JWTs are checked with PyJWT")
        return self


class LogSettings(Section):
    prefix = "SIDECAR_LOG_"
    title = "Logs"

    level: LogLevel = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    format: LogFormat = Field(
        "json",
        description="json: one object a line with time, level, logger, message and, in every "
        "line about them, query_id, group_id, checkpoint_id, and process (watcher or writer) "
        "in a child process's lines; text: for people ([watcher] or [writer] in a child's)",
    )


class DatabaseSettings(Section):
    prefix = "SIDECAR_DATABASE_"
    title = "The database"

    url: DatabaseUrl = Field(
        default_factory=default_database_url,
        description="SQLAlchemy URL: sqlite:////abs/path.db or postgresql+psycopg://... (the "
        "postgres extra); default sqlite:///<working folder>/sidecar.db",
    )


class CommitSettings(Section):
    title = "Commits"

    commit_timeout_seconds: PositiveFloat = Field(
        10.0,
        description="bound of one commit to Kafka; a commit that takes longer counts as failed "
        "(timeout)",
    )
    max_pending_checkpoints: PositiveInt = Field(
        100,
        description="pending checkpoints per query (Flink's bound); the oldest is dropped past it",
    )
    retry_initial_seconds: PositiveFloat = Field(
        0.5, description="first retry delay after a failed commit (doubled each time)"
    )
    retry_max_seconds: PositiveFloat = Field(
        10.0,
        description="longest retry delay: bounds how long an idle query waits after Kafka returns",
    )
    min_commit_interval_seconds: CommitInterval = Field(
        0.0,
        description="commit a group at most once per this long, with its newest offsets "
        "(0-3600; 0: every checkpoint); a group's own interval (API) overrides it",
    )
    recommit_idle_after_seconds: PositiveFloat = Field(
        86_400.0,
        description="commit an idle group's unchanged offsets again after this long (Kafka "
        "drops a member-less group's offsets offsets.retention.minutes, 7 days by default, "
        "after its last commit)",
    )
    shutdown_grace_seconds: PositiveFloat = Field(
        10.0, description="how long commits in flight may finish on shutdown"
    )

    @model_validator(mode="after")
    def _retries_ordered(self) -> Self:
        if self.retry_max_seconds < self.retry_initial_seconds:
            raise ConfigError(
                self.variable("retry_max_seconds"),
                f"must not be less than {self.variable('retry_initial_seconds')}",
            )
        return self


class StatusSettings(Section):
    title = "Lag and status"

    lag_read_interval_seconds: PositiveFloat = Field(
        10.0,
        description="read the log-end offsets of committed partitions this often (status and lag)",
    )
    status_window: StatusWindow = Field(
        10, description="commits per group its status is judged on (Burrow's intervals)"
    )
    status_stop_after_seconds: PositiveFloat = Field(
        600.0, description="records waiting this long with no commit make a group STOP"
    )
    status_err_after_failures: PositiveInt = Field(
        3, description="consecutive failed commits that make a group's status ERR"
    )
    read_record_times: Flag = Field(
        True,
        description="read the timestamp of a lagging partition's oldest unprocessed record "
        "from Kafka when the log-end history cannot place it (time lag; one fetch, kept while "
        "the committed offset stays)",
    )
    retention_risk_seconds: PositiveFloat = Field(
        3600.0,
        description="a group is AT_RISK when its unprocessed records are estimated to be "
        "deleted sooner than this",
    )
    ui_max_pages_per_second: NonNegativeFloat = Field(
        10.0, description="answer /ui at most this often, pages in turn (0: no limit)"
    )


class MetricsSettings(Section):
    prefix = "SIDECAR_METRICS_"
    title = "What /metrics exports"

    granularity: Granularity = Field(
        "topic",
        description="per-group series of /metrics by group, topic or partition "
        "(docs/operate/metrics.md)",
    )
    groups: SomePatterns = Field(
        ("*",),
        description="export only groups matching these shell patterns (comma-separated)",
    )
    exclude_groups: Patterns = Field((), description="and no group matching these")
    topics: SomePatterns = Field(
        ("*",),
        description="export per-topic and per-partition series of these topics only (shell "
        "patterns)",
    )
    exclude_topics: Patterns = Field((), description="and of no topic matching these")
    max_scrapes_per_second: NonNegativeFloat = Field(
        20.0, description="answer /metrics at most this often, scrapes in turn (0: no limit)"
    )
    max_age_seconds: NonNegativeFloat = Field(
        1.0,
        description="serve the per-group series built at most this long ago (0: build for every "
        "scrape)",
    )
    export_kafka_lag: Flag = Field(
        False,
        validation_alias="SIDECAR_EXPORT_KAFKA_LAG",
        description="also export kafka_exporter's kafka_consumergroup_lag, _current_offset "
        "(and _sum) for our groups; off where kafka_exporter runs (it reports them too)",
    )


class ReplicaSettings(Section):
    title = "Replicas"

    replicated: Flag = Field(
        False,
        description="one of several replicas on one PostgreSQL; leases pick who commits each "
        "group (docs/run/replicas.md)",
    )
    lease_seconds: PositiveFloat = Field(
        30.0,
        description="with replicas: a replica's hold on its groups; a dead replica's groups "
        "move after at most this (at least 3 x SIDECAR_COMMIT_TIMEOUT_SECONDS)",
    )

    @model_validator(mode="after")
    def _driver_installed(self) -> Self:
        if self.replicated:
            what = "replicas hear each other through psycopg 3"
            _needs("psycopg", "postgres", self.variable("replicated"), what)
        return self


class FollowSettings(Section):
    prefix = "SIDECAR_FOLLOW_"
    title = "Followed checkpoint folders"

    interval_seconds: PositiveFloat = Field(
        5.0,
        description="read each followed checkpoint folder this often "
        "(docs/attach/checkpoint-folder.md)",
    )
    relist_every: PositiveInt = Field(
        60, description="list a followed folder every N polls (between: probe the next batch)"
    )
    read_timeout_seconds: PositiveFloat = Field(
        30.0,
        description="a followed folder's read that takes longer (a hung mount) fails that "
        "folder's poll; the other folders go on",
    )
    storage_options: StorageOptions | None = Field(
        None,
        validation_alias="SIDECAR_CHECKPOINT_STORAGE_OPTIONS",
        repr=False,  # credentials among them
        description='fsspec options per protocol, JSON: {"s3": {"endpoint_url": '
        '"http://minio:9000"}}',
    )


class KafkaSettings(Section):
    prefix = "SIDECAR_KAFKA_"
    title = "Kafka: how the service reaches a cluster"

    bootstrap_servers: Bootstrap = Field(
        "127.0.0.1:9092", description="Kafka bootstrap servers, host:port[,host:port]"
    )
    client_id: Text = Field("spark-offset-sidecar", description="Kafka client.id")
    security_protocol: SecurityProtocol = Field(
        "PLAINTEXT",
        description="Kafka security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    )
    sasl_mechanism: SaslMechanism = Field(
        "PLAIN",
        description="SASL mechanism (AWS_MSK_IAM: OAUTHBEARER with tokens of AWS's MSK IAM signer)",
    )
    sasl_username: Text | None = Field(None, description="SASL user")
    sasl_password: Text | None = Field(None, repr=False, description="SASL password")
    sasl_password_file: ReadableFile | None = Field(
        None, description="file holding the SASL password (a mounted Secret)"
    )
    # OAUTHBEARER from a token endpoint (OAuth 2 client credentials, as Kafka's KIP-768).
    oauth_token_url: HttpUrl | None = Field(
        None, description="OAUTHBEARER: the token endpoint (client credentials grant)"
    )
    oauth_client_id: Text | None = Field(None, description="OAUTHBEARER: the client id")
    oauth_client_secret: Text | None = Field(
        None, repr=False, description="OAUTHBEARER: the client secret"
    )
    oauth_client_secret_file: ReadableFile | None = Field(
        None, description="OAUTHBEARER: file holding the client secret (read at each renewal)"
    )
    oauth_scope: Text | None = Field(None, description="OAUTHBEARER: scope asked for")
    oauth_audience: Text | None = Field(
        None, description="OAUTHBEARER: audience asked for (Auth0, Okta, Keycloak)"
    )
    sasl_extensions: Extensions = Field(
        (),
        description="OAUTHBEARER: SASL extensions, key=value,... (Confluent Cloud: "
        "logicalCluster=lkc-..,identityPoolId=pool-..)",
    )
    # AWS_MSK_IAM: the signer reads credentials from AWS's usual places (IRSA, Pod Identity).
    aws_region: Text | None = Field(
        None,
        description="AWS_MSK_IAM: the cluster's region (default: AWS_REGION, AWS_DEFAULT_REGION)",
    )
    aws_role_arn: Text | None = Field(
        None, description="AWS_MSK_IAM: a role to assume for the signature (default: none)"
    )
    ssl_cafile: ReadableFile | None = Field(None, description="CA bundle for TLS")
    ssl_certfile: ReadableFile | None = Field(None, description="client certificate")
    ssl_keyfile: ReadableFile | None = Field(None, description="client key")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], prefix: str | None = None) -> Self:
        """As every section, a region not given taken from AWS_REGIONS in ``environ``."""
        variable = cls.variable("aws_region", prefix)
        aws = next((environ[name] for name in AWS_REGIONS if environ.get(name)), None)
        if aws and not environ.get(variable, "").strip():
            environ = {**environ, variable: aws}
        return super().from_environ(environ, prefix)

    def oauth_secret(self) -> str:
        """The OAuth client secret, from the file when one is given (read when needed)."""
        return _secret(self.oauth_client_secret_file, self.oauth_client_secret) or ""

    def sasl_secret(self) -> str | None:
        """The SASL password, from the file when one is given (read when needed)."""
        return _secret(self.sasl_password_file, self.sasl_password)

    @model_validator(mode="after")
    def _sasl_complete(self) -> Self:
        if not self.security_protocol.startswith("SASL"):
            return self
        if self.sasl_mechanism == "OAUTHBEARER":
            self._check_oauth()
        elif self.sasl_mechanism == "AWS_MSK_IAM":
            self._check_msk_iam()
        elif not self.sasl_username:
            raise ConfigError(self.variable("sasl_username"), "SASL needs a user name")
        return self

    def _check_oauth(self) -> None:
        for name in ("oauth_token_url", "oauth_client_id"):
            if not getattr(self, name):
                raise ConfigError(self.variable(name), "SASL OAUTHBEARER needs it")
        if not (self.oauth_client_secret or self.oauth_client_secret_file):
            raise ConfigError(
                self.variable("oauth_client_secret"),
                "SASL OAUTHBEARER needs the client secret (or "
                f"{self.variable('oauth_client_secret_file')})",
            )

    def _check_msk_iam(self) -> None:
        what = "AWS_MSK_IAM signs with aws-msk-iam-sasl-signer-python"
        _needs("aws_msk_iam_sasl_signer", "msk-iam", self.variable("sasl_mechanism"), what)
        if not self.aws_region:
            raise ConfigError(
                self.variable("aws_region"),
                "AWS_MSK_IAM needs the cluster's region (or AWS_REGION)",
            )


def _needs(module: str, extra: str, variable: str, what: str) -> None:
    """Refuse ``variable`` unless ``module``, of the extra ``extra``, is installed."""
    if importlib.util.find_spec(module) is None:
        raise ConfigError(variable, f"{what}, which is not installed: {install_extra(extra)}")


def _secret(path: Path | None, literal: str | None) -> str | None:
    """A secret from its file (a mounted Secret, read again at each call) or as given."""
    return path.read_text().strip() if path else literal


class ClusterSettings(Section):
    title = "Several Kafka clusters"

    name: ClusterName = Field(
        "default",
        validation_alias="SIDECAR_KAFKA_CLUSTER_NAME",
        description="the name of the Kafka cluster the SIDECAR_KAFKA_* settings describe: jobs "
        "name it (their cluster option), statuses and /ui show it",
    )
    more: ClusterNames = Field(
        (),
        validation_alias="SIDECAR_KAFKA_CLUSTERS",
        description="names of more Kafka clusters (comma-separated), each described by the "
        "SIDECAR_KAFKA_* settings under SIDECAR_CLUSTER_<NAME>_ ('-' as '_'), e.g. "
        "SIDECAR_CLUSTER_EU_WEST_KAFKA_BOOTSTRAP_SERVERS; what is not given there takes its "
        "default",
    )
    by_group: ClusterByGroup = Field(
        (),
        validation_alias="SIDECAR_KAFKA_CLUSTER_BY_GROUP",
        description="the cluster of a group whose job names none: pattern=cluster,... (first "
        "match; else SIDECAR_KAFKA_CLUSTER_NAME's); a group keeps the cluster of its first "
        "event",
    )

    @property
    def names(self) -> tuple[str, ...]:
        """Every cluster's name, SIDECAR_KAFKA_CLUSTER_NAME's first."""
        return (self.name, *self.more)

    def choice(self) -> Clusters:
        """The clusters as the core chooses among them."""
        return Clusters(self.name, self.more, self.by_group)

    @model_validator(mode="after")
    def _names_known(self) -> Self:
        if self.name in self.more:
            raise ConfigError(
                self.variable("more"),
                f"names {self.name!r}, which SIDECAR_KAFKA_CLUSTER_NAME already names (the "
                "SIDECAR_KAFKA_* settings describe it)",
            )
        for _pattern, name in self.by_group:
            if name not in self.names:
                raise ConfigError(
                    self.variable("by_group"),
                    f"no cluster is named {name!r}; known: {', '.join(self.names)}",
                )
        return self

    @staticmethod
    def kafka_prefix(cluster: str) -> str:
        """The prefix of cluster ``cluster``'s ``KafkaSettings`` variables."""
        return f"SIDECAR_CLUSTER_{cluster.upper().replace('-', '_')}_KAFKA_"
