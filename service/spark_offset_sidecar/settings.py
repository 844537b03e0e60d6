"""Settings, read once from ``SIDECAR_*`` environment variables and checked at start-up.

A missing required value, a value that does not parse, or an unknown ``SIDECAR_``
variable (a typo would otherwise be silently ignored) raises ``ConfigError`` naming it.

Several Kafka clusters: the ``SIDECAR_KAFKA_*`` settings describe the cluster named
``SIDECAR_KAFKA_CLUSTER_NAME``; each name in ``SIDECAR_KAFKA_CLUSTERS`` is one more,
described by the same settings under ``SIDECAR_CLUSTER_<NAME>_`` (``-`` as ``_``):
``SIDECAR_CLUSTER_EU_WEST_KAFKA_BOOTSTRAP_SERVERS``. A setting not given for a cluster
takes its default, never another cluster's value (credentials never cross clusters).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import ipaddress
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.names import CLUSTER
from spark_offset_sidecar.errors import ConfigError
from spark_offset_sidecar.gil import SWITCH_INTERVAL

PREFIX = "SIDECAR_"


def _bootstrap(value: str) -> str:
    servers = [s.strip() for s in value.split(",") if s.strip()]
    if not servers:
        raise ValueError("needs at least one host:port")
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{server!r} is not host:port")
    return ",".join(servers)


def _database_url(value: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(value)
    except ArgumentError as exc:
        raise ValueError(f"not a SQLAlchemy URL ({exc})") from None
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError("only sqlite:// and postgresql:// URLs are supported")
    if url.get_backend_name() == "postgresql":
        driver = url.get_driver_name()  # SQLAlchemy's default for postgresql:// is psycopg2
        if importlib.util.find_spec(driver) is None:
            raise ValueError(
                f"PostgreSQL through the {driver} driver, which is not installed: install "
                "the postgres extra (pip install 'spark-offset-sidecar[postgres]', psycopg 3) "
                "and write the URL as postgresql+psycopg://..."
            )
    return value


# A commit interval longer than this would leave lag tools minutes behind the jobs.
MAX_COMMIT_INTERVAL = 3600.0


def _positive_float(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or not number > 0:
        raise ValueError("must be a finite number greater than 0")
    return number


def _commit_interval(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or not 0 <= number <= MAX_COMMIT_INTERVAL:
        raise ValueError(f"must be a number of seconds from 0 to {MAX_COMMIT_INTERVAL:g}")
    return number


def _non_negative_float(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError("must be a finite number, 0 or more")
    return number


def _switch_interval(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or not 0 < number <= 0.1:
        raise ValueError("must be a number of seconds greater than 0, at most 0.1")
    return number


def _patterns(value: str) -> tuple[str, ...]:
    """Comma-separated shell patterns (``orders-*``), as the token file's grants take."""
    patterns = tuple(p.strip() for p in value.split(",") if p.strip())
    for pattern in patterns:
        if any(c.isspace() or not c.isprintable() for c in pattern):
            raise ValueError(f"{pattern!r} is not a name pattern")
    return patterns


def _some_patterns(value: str) -> tuple[str, ...]:
    patterns = _patterns(value)
    if not patterns:
        raise ValueError("needs at least one pattern (* for every name)")
    return patterns


def _int_at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    def parse(value: str) -> int:
        number = int(value)
        if number < minimum:
            raise ValueError(f"must be at least {minimum}{why}")
        return number

    return parse


_positive_int = _int_at_least(1)


def _port(value: str) -> int:
    number = int(value)
    if not 0 <= number < 65536:
        raise ValueError("must be a TCP port (0-65535)")
    return number


def _log_level(value: str) -> str:
    level = value.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
    return level


def _flag(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _choice(*allowed: str, case: Callable[[str], str] = str.upper) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if case(value) not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return case(value)

    return parse


def _readable_file(value: str) -> str:
    path = Path(value)
    if not path.is_file():
        raise ValueError("no such file")
    return str(path.resolve())


def _http_url(value: str) -> str:
    scheme, _, rest = value.partition("://")
    if scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise ValueError("must be an http:// or https:// URL")
    return value


def _extensions(value: str) -> tuple[tuple[str, str], ...]:
    """``key=value,key=value``: SASL extensions (RFC 7628: keys of letters only)."""
    found: dict[str, str] = {}
    for pair in (p.strip() for p in value.split(",") if p.strip()):
        key, equals, text = pair.partition("=")
        if not equals or not key.isascii() or not key.isalpha() or key == "auth":
            raise ValueError(f"{pair!r} is not key=value with a key of letters (not 'auth')")
        if not text.isprintable():
            raise ValueError(f"the value of {key!r} holds a control character")
        found[key] = text
    return tuple(found.items())


def _storage_options(value: str) -> dict[str, dict[str, Any]]:
    try:
        parsed = json.loads(value)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise ValueError('must be an object of protocol -> options, e.g. {"s3": {...}}')
    return parsed


def _cluster_name(value: str) -> str:
    name = value.strip()
    if problem := CLUSTER.problem(name):
        raise ValueError(problem)
    return name


@dataclass(frozen=True)
class KafkaCluster:
    """One more Kafka cluster: its name and the ``kafka_*`` settings given for it (the
    others take their defaults)."""

    name: str
    values: tuple[tuple[str, Any], ...] = field(default=(), repr=False)  # secrets among them

    def __repr__(self) -> str:
        return f"KafkaCluster({self.name!r}, set={[name for name, _ in self.values]})"


def _clusters(value: str) -> tuple[KafkaCluster, ...]:
    names = [_cluster_name(n) for n in value.split(",") if n.strip()]
    if len(set(names)) != len(names):
        raise ValueError("names a cluster twice")
    return tuple(KafkaCluster(name) for name in names)


def _cluster_by_group(value: str) -> tuple[tuple[str, str], ...]:
    """``pattern=cluster,...``: the first pattern that matches a group names its cluster."""
    pairs = []
    for item in (i.strip() for i in value.split(",") if i.strip()):
        pattern, equals, name = item.partition("=")
        if not equals:
            raise ValueError(f"{item!r} is not pattern=cluster")
        (pattern,) = _some_patterns(pattern)
        pairs.append((pattern, _cluster_name(name)))
    return tuple(pairs)


def cluster_env_name(cluster: str, field_name: str) -> str:
    """The variable that sets ``field_name`` (a ``kafka_*`` setting) for ``cluster``."""
    return f"{PREFIX}CLUSTER_{cluster.upper().replace('-', '_')}_{field_name.upper()}"


def _setting(default: Any, parse: Callable[[str], Any], doc: str, *, secret: bool = False) -> Any:
    return field(default=default, repr=not secret, metadata={"parse": parse, "doc": doc})


def _secret(path: str | None, literal: str | None) -> str | None:
    """A secret from its file (a mounted Secret, read again at each call) or as given."""
    return Path(path).read_text().strip() if path else literal


def default_database_url() -> str:
    return f"sqlite:///{Path('sidecar.db').resolve()}"


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap_servers: str = _setting(
        "127.0.0.1:9092", _bootstrap, "Kafka bootstrap servers, host:port[,host:port]"
    )
    kafka_cluster_name: str = _setting(
        "default",
        _cluster_name,
        "the name of the Kafka cluster the SIDECAR_KAFKA_* settings describe: jobs name it "
        "(their cluster option), statuses and /ui show it",
    )
    kafka_clusters: tuple[KafkaCluster, ...] = _setting(
        (),
        _clusters,
        "names of more Kafka clusters (comma-separated), each described by the SIDECAR_KAFKA_* "
        "settings under SIDECAR_CLUSTER_<NAME>_ ('-' as '_'), e.g. "
        "SIDECAR_CLUSTER_EU_WEST_KAFKA_BOOTSTRAP_SERVERS; what is not given there takes its "
        "default",
    )
    kafka_cluster_by_group: tuple[tuple[str, str], ...] = _setting(
        (),
        _cluster_by_group,
        "the cluster of a group whose job names none: pattern=cluster,... (first match; "
        "else SIDECAR_KAFKA_CLUSTER_NAME's); a group keeps the cluster of its first event",
    )
    database_url: str = _setting(
        None,
        _database_url,
        "SQLAlchemy URL: sqlite:////abs/path.db or postgresql+psycopg://... (the postgres extra); "
        "default sqlite:///<working folder>/sidecar.db",
    )
    host: str = _setting("127.0.0.1", str, "address to listen on")
    port: int = _setting(8000, _port, "port to listen on")
    commit_timeout_seconds: float = _setting(
        10.0,
        _positive_float,
        "bound of one commit to Kafka; a commit that takes longer counts as failed (timeout)",
    )
    max_pending_checkpoints: int = _setting(
        100,
        _positive_int,
        "pending checkpoints per query (Flink's bound); the oldest is dropped past it",
    )
    retry_initial_seconds: float = _setting(
        0.5, _positive_float, "first retry delay after a failed commit (doubled each time)"
    )
    retry_max_seconds: float = _setting(
        10.0,
        _positive_float,
        "longest retry delay: bounds how long an idle query waits after Kafka returns",
    )
    min_commit_interval_seconds: float = _setting(
        0.0,
        _commit_interval,
        "commit a group at most once per this long, with its newest offsets (0-3600; 0: "
        "every checkpoint); a group's own interval (API) overrides it",
    )
    recommit_idle_after_seconds: float = _setting(
        86_400.0,
        _positive_float,
        "commit an idle group's unchanged offsets again after this long (Kafka drops a "
        "member-less group's offsets offsets.retention.minutes, 7 days by default, after its "
        "last commit)",
    )
    max_body_bytes: int = _setting(
        1_048_576, _positive_int, "largest request body; larger requests are answered 413"
    )
    shutdown_grace_seconds: float = _setting(
        10.0, _positive_float, "how long commits in flight may finish on shutdown"
    )
    kafka_client_id: str = _setting("spark-offset-sidecar", str, "Kafka client.id")
    log_level: str = _setting("INFO", _log_level, "DEBUG, INFO, WARNING or ERROR")
    log_format: str = _setting(
        "json",
        _choice("json", "text", case=str.lower),
        "json: one object a line with time, level, logger, message and, in every line "
        "about them, query_id, group_id, checkpoint_id; text: for people",
    )
    # Lag and status (core.group_status): read the brokers' log ends this often.
    lag_read_interval_seconds: float = _setting(
        10.0,
        _positive_float,
        "read the log-end offsets of committed partitions this often (status and lag)",
    )
    status_window: int = _setting(
        10,
        _int_at_least(2, " (a status compares commits)"),
        "commits per group its status is judged on (Burrow's intervals)",
    )
    status_stop_after_seconds: float = _setting(
        600.0, _positive_float, "records waiting this long with no commit make a group STOP"
    )
    status_err_after_failures: int = _setting(
        3, _positive_int, "consecutive failed commits that make a group's status ERR"
    )
    export_kafka_lag: bool = _setting(
        False,
        _flag,
        "also export kafka_exporter's kafka_consumergroup_lag, _current_offset (and _sum) "
        "for our groups; off where kafka_exporter runs (it reports them too)",
    )
    read_record_times: bool = _setting(
        True,
        _flag,
        "read the timestamp of a lagging partition's oldest unprocessed record from Kafka "
        "when the log-end history cannot place it (time lag; one fetch, kept while the "
        "committed offset stays)",
    )
    retention_risk_seconds: float = _setting(
        3600.0,
        _positive_float,
        "a group is AT_RISK when its unprocessed records are estimated to be deleted sooner "
        "than this",
    )
    # What /metrics exports per group (observe.fleet_metrics): the cost of looking.
    metrics_granularity: str = _setting(
        "topic",
        _choice("group", "topic", "partition", case=str.lower),
        "per-group series of /metrics by group, topic or partition (docs/operate/metrics.md)",
    )
    metrics_groups: tuple[str, ...] = _setting(
        ("*",), _some_patterns, "export only groups matching these shell patterns (comma-separated)"
    )
    metrics_exclude_groups: tuple[str, ...] = _setting((), _patterns, "and no group matching these")
    metrics_topics: tuple[str, ...] = _setting(
        ("*",),
        _some_patterns,
        "export per-topic and per-partition series of these topics only (shell patterns)",
    )
    metrics_exclude_topics: tuple[str, ...] = _setting(
        (), _patterns, "and of no topic matching these"
    )
    metrics_max_scrapes_per_second: float = _setting(
        20.0,
        _non_negative_float,
        "answer /metrics at most this often, scrapes in turn (0: no limit)",
    )
    metrics_max_age_seconds: float = _setting(
        1.0,
        _non_negative_float,
        "serve the per-group series built at most this long ago (0: build for every scrape)",
    )
    gc_thaw_seconds: float = _setting(
        3600.0,
        _non_negative_float,
        "freeze what survives each full garbage collection; scan it all again this often "
        "(0: never freeze)",
    )
    gil_switch_interval_seconds: float = _setting(
        SWITCH_INTERVAL,
        _switch_interval,
        "how soon the event loop hands the GIL to a worker thread that waits for it "
        "(CPython's default: 0.005)",
    )
    # Several replicas on one PostgreSQL (core.leases): each group is committed by the
    # replica holding its lease.
    replicated: bool = _setting(
        False,
        _flag,
        "one of several replicas on one PostgreSQL; leases pick who commits each group "
        "(docs/run/replicas.md)",
    )
    lease_seconds: float = _setting(
        30.0,
        _positive_float,
        "with replicas: a replica's hold on its groups; a dead replica's groups move after "
        "at most this (at least 3 x SIDECAR_COMMIT_TIMEOUT_SECONDS)",
    )
    # Checkpoint folders followed instead of a listener (runtime.checkpoint_follower).
    follow_interval_seconds: float = _setting(
        5.0,
        _positive_float,
        "read each followed checkpoint folder this often (docs/attach/checkpoint-folder.md)",
    )
    follow_relist_every: int = _setting(
        60, _positive_int, "list a followed folder every N polls (between: probe the next batch)"
    )
    follow_read_timeout_seconds: float = _setting(
        30.0,
        _positive_float,
        "a followed folder's read that takes longer (a hung mount) fails that folder's "
        "poll; the other folders go on",
    )
    checkpoint_storage_options: Mapping[str, Mapping[str, Any]] | None = _setting(
        None,
        _storage_options,
        'fsspec options per protocol, JSON: {"s3": {"endpoint_url": "http://minio:9000"}}',
        secret=True,
    )
    max_partitions_per_event: int = _setting(
        10_000, _positive_int, "partitions in one event; larger events are answered 422"
    )
    max_topics_per_event: int = _setting(
        100, _positive_int, "topics in one event; larger events are answered 422"
    )
    # Who may call (see http.auth and docs/secure/index.md).
    tokens_file: str | None = _setting(
        None, _readable_file, "JSON file of bearer tokens and their grants (docs/secure/index.md)"
    )
    protect_reads: bool = _setting(
        True,
        _flag,
        "with tokens, GET /v1/* and /ui need a token with read (/metrics, /livez and "
        "/readyz stay open)",
    )
    allow_unauthenticated: bool = _setting(
        False, _flag, "allow listening beyond loopback without tokens"
    )
    tls_certfile: str | None = _setting(None, _readable_file, "serve HTTPS with this certificate")
    tls_keyfile: str | None = _setting(None, _readable_file, "and this private key")
    # Jobs' workload identity: JWTs of an OIDC issuer, granted by the tokens file's
    # "identities" (http.auth, adapters.oidc.jwks_verifier).
    oidc_issuer: str | None = _setting(
        None, _http_url, "accept jobs' JWTs of this issuer (their iss), e.g. the cluster's"
    )
    oidc_audience: str | None = _setting(
        None, str, "the audience (aud) those tokens must be for, e.g. spark-offset-sidecar"
    )
    oidc_jwks_url: str | None = _setting(
        None, _http_url, "the issuer's keys (default: jwks_uri of its discovery document)"
    )
    oidc_ca_file: str | None = _setting(
        None, _readable_file, "CA bundle for the issuer's HTTPS (a cluster's own CA)"
    )
    oidc_bearer_token_file: str | None = _setting(
        None,
        _readable_file,
        "a token sent to the issuer to fetch its keys (a Kubernetes API server asks for one)",
    )
    oidc_jwks_refresh_seconds: float = _setting(
        300.0, _positive_float, "fetch the issuer's keys again this often"
    )
    # How the committer reaches Kafka.
    kafka_security_protocol: str = _setting(
        "PLAINTEXT",
        _choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        "Kafka security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    )
    kafka_sasl_mechanism: str = _setting(
        "PLAIN",
        _choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"),
        "SASL mechanism (AWS_MSK_IAM: OAUTHBEARER with tokens of AWS's MSK IAM signer)",
    )
    kafka_sasl_username: str | None = _setting(None, str, "SASL user")
    kafka_sasl_password: str | None = _setting(None, str, "SASL password", secret=True)
    kafka_sasl_password_file: str | None = _setting(
        None, _readable_file, "file holding the SASL password (a mounted Secret)"
    )
    # OAUTHBEARER from a token endpoint (OAuth 2 client credentials, as Kafka's KIP-768).
    kafka_oauth_token_url: str | None = _setting(
        None, _http_url, "OAUTHBEARER: the token endpoint (client credentials grant)"
    )
    kafka_oauth_client_id: str | None = _setting(None, str, "OAUTHBEARER: the client id")
    kafka_oauth_client_secret: str | None = _setting(
        None, str, "OAUTHBEARER: the client secret", secret=True
    )
    kafka_oauth_client_secret_file: str | None = _setting(
        None, _readable_file, "OAUTHBEARER: file holding the client secret (read at each renewal)"
    )
    kafka_oauth_scope: str | None = _setting(None, str, "OAUTHBEARER: scope asked for")
    kafka_oauth_audience: str | None = _setting(
        None, str, "OAUTHBEARER: audience asked for (Auth0, Okta, Keycloak)"
    )
    kafka_sasl_extensions: tuple[tuple[str, str], ...] = _setting(
        (),
        _extensions,
        "OAUTHBEARER: SASL extensions, key=value,... (Confluent Cloud: logicalCluster=lkc-..,"
        "identityPoolId=pool-..)",
    )
    # AWS_MSK_IAM: the signer reads credentials from AWS's usual places (IRSA, Pod Identity).
    kafka_aws_region: str | None = _setting(
        None, str, "AWS_MSK_IAM: the cluster's region (default: AWS_REGION, AWS_DEFAULT_REGION)"
    )
    kafka_aws_role_arn: str | None = _setting(
        None, str, "AWS_MSK_IAM: a role to assume for the signature (default: none)"
    )
    kafka_ssl_cafile: str | None = _setting(None, _readable_file, "CA bundle for TLS")
    kafka_ssl_certfile: str | None = _setting(None, _readable_file, "client certificate")
    kafka_ssl_keyfile: str | None = _setting(None, _readable_file, "client key")

    def __post_init__(self) -> None:
        if self.database_url is None:
            object.__setattr__(self, "database_url", default_database_url())
        self._check_values()
        if self.retry_max_seconds < self.retry_initial_seconds:
            raise ConfigError(
                env_name("retry_max_seconds"), "must not be less than SIDECAR_RETRY_INITIAL_SECONDS"
            )
        if not self.tokens_file and not self.allow_unauthenticated and not _loopback(self.host):
            raise ConfigError(
                env_name("host"),
                f"listening on {self.host} without SIDECAR_TOKENS_FILE lets anyone who reaches "
                "it move consumer offsets; configure tokens, or set "
                "SIDECAR_ALLOW_UNAUTHENTICATED=true to accept that",
            )
        if bool(self.tls_certfile) != bool(self.tls_keyfile):
            raise ConfigError(env_name("tls_keyfile"), "HTTPS needs both certificate and key")
        if self.replicated and not self.database_url.startswith("postgresql"):
            raise ConfigError(
                env_name("database_url"),
                "SIDECAR_REPLICATED=true needs a postgresql:// URL: replicas share one database",
            )
        if self.replicated and importlib.util.find_spec("psycopg") is None:
            raise ConfigError(
                env_name("replicated"),
                "replicas hear each other through psycopg 3, which is not installed: install "
                "the postgres extra (pip install 'spark-offset-sidecar[postgres]')",
            )
        if self.replicated and self.lease_seconds < 3 * self.commit_timeout_seconds:
            raise ConfigError(
                env_name("lease_seconds"),
                f"must be at least 3 x SIDECAR_COMMIT_TIMEOUT_SECONDS "
                f"({3 * self.commit_timeout_seconds:g}): a replica stops starting commits two "
                "commit timeouts before its lease ends",
            )
        if self.kafka_security_protocol.startswith("SASL"):
            self._check_sasl()
        self._check_oidc()
        self._check_clusters()

    def _check_values(self) -> None:
        """Every value given, however the settings are built (from the environment, by
        ``Settings(...)``, by ``for_cluster``), passes its setting's own parser: a value
        the environment could not set is refused here too, naming the variable. A single
        value is kept as the parser gives it (``sasl_ssl`` is ``SASL_SSL`` however given)."""
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if value is None or value == spec.default:
                continue
            try:
                parsed = spec.metadata["parse"](_as_env(value))
            except ValueError as exc:
                raise ConfigError(env_name(spec.name), f"invalid value {value!r}: {exc}") from None
            if isinstance(value, str | int | float):  # tuples and dicts hold more than text
                object.__setattr__(self, spec.name, parsed)

    def _check_clusters(self) -> None:
        names = self.cluster_names()
        if self.kafka_cluster_name in names[1:]:
            raise ConfigError(
                env_name("kafka_clusters"),
                f"names {self.kafka_cluster_name!r}, which SIDECAR_KAFKA_CLUSTER_NAME already "
                "names (the SIDECAR_KAFKA_* settings describe it)",
            )
        for _pattern, name in self.kafka_cluster_by_group:
            if name not in names:
                raise ConfigError(
                    env_name("kafka_cluster_by_group"),
                    f"no cluster is named {name!r}; known: {', '.join(names)}",
                )
        for cluster in self.kafka_clusters:
            try:
                self.for_cluster(cluster.name)
            except ConfigError as exc:
                variable = exc.variable.removeprefix(PREFIX).lower()
                raise ConfigError(cluster_env_name(cluster.name, variable), exc.problem) from None

    def cluster_names(self) -> tuple[str, ...]:
        """Every Kafka cluster's name, SIDECAR_KAFKA_CLUSTER_NAME's first."""
        return (self.kafka_cluster_name, *(c.name for c in self.kafka_clusters))

    def clusters(self) -> Clusters:
        return Clusters(
            self.kafka_cluster_name,
            tuple(c.name for c in self.kafka_clusters),
            self.kafka_cluster_by_group,
        )

    def for_cluster(self, name: str) -> Settings:
        """These settings with the Kafka connection of cluster ``name``: what its Kafka
        adapters are built from."""
        if name == self.kafka_cluster_name:
            return self
        cluster = next((c for c in self.kafka_clusters if c.name == name), None)
        if cluster is None:
            raise KeyError(name)
        defaults = {f.name: f.default for f in dataclasses.fields(self) if f.name in KAFKA_FIELDS}
        return dataclasses.replace(
            self,
            **{**defaults, **dict(cluster.values)},
            kafka_cluster_name=name,
            kafka_clusters=(),
            kafka_cluster_by_group=(),
        )

    def _check_oidc(self) -> None:
        issuer, audience = self.oidc_issuer, self.oidc_audience
        if not issuer and not audience:
            for name in ("oidc_jwks_url", "oidc_ca_file", "oidc_bearer_token_file"):
                if getattr(self, name):
                    raise ConfigError(env_name(name), "needs SIDECAR_OIDC_ISSUER")
            return
        if not issuer or not audience:
            missing = "oidc_audience" if issuer else "oidc_issuer"
            raise ConfigError(
                env_name(missing), "jobs' JWTs are checked by issuer and audience: give both"
            )
        if not self.tokens_file:
            raise ConfigError(
                env_name("tokens_file"),
                'SIDECAR_OIDC_ISSUER grants by the "identities" of the tokens file: give one',
            )
        if importlib.util.find_spec("jwt") is None:
            raise ConfigError(
                env_name("oidc_issuer"),
                "jobs' JWTs are checked with PyJWT, which is not installed: install the oidc "
                "extra (pip install 'spark-offset-sidecar[oidc]')",
            )

    def _check_sasl(self) -> None:
        mechanism = self.kafka_sasl_mechanism
        if mechanism == "OAUTHBEARER":
            for name in ("kafka_oauth_token_url", "kafka_oauth_client_id"):
                if not getattr(self, name):
                    raise ConfigError(env_name(name), "SASL OAUTHBEARER needs it")
            if not (self.kafka_oauth_client_secret or self.kafka_oauth_client_secret_file):
                raise ConfigError(
                    env_name("kafka_oauth_client_secret"),
                    "SASL OAUTHBEARER needs the client secret (or "
                    f"{env_name('kafka_oauth_client_secret_file')})",
                )
        elif mechanism == "AWS_MSK_IAM":
            if importlib.util.find_spec("aws_msk_iam_sasl_signer") is None:
                raise ConfigError(
                    env_name("kafka_sasl_mechanism"),
                    "AWS_MSK_IAM signs with aws-msk-iam-sasl-signer-python, which is not "
                    "installed: install the msk-iam extra "
                    "(pip install 'spark-offset-sidecar[msk-iam]')",
                )
            if not self.aws_region():
                raise ConfigError(
                    env_name("kafka_aws_region"),
                    "AWS_MSK_IAM needs the cluster's region (or AWS_REGION)",
                )
        elif not self.kafka_sasl_username:
            raise ConfigError(env_name("kafka_sasl_username"), "SASL needs a user name")

    def aws_region(self) -> str | None:
        """The MSK cluster's region: the setting, else AWS's own variables."""
        return (
            self.kafka_aws_region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
        )

    def kafka_oauth_secret(self) -> str:
        """The OAuth client secret, from the file when one is given (read when needed)."""
        return _secret(self.kafka_oauth_client_secret_file, self.kafka_oauth_client_secret) or ""

    def kafka_sasl_secret(self) -> str | None:
        """The SASL password, from the file when one is given (read when needed)."""
        return _secret(self.kafka_sasl_password_file, self.kafka_sasl_password)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        environ = os.environ if environ is None else environ
        fields = {env_name(f.name): f for f in dataclasses.fields(cls)}
        values = _parsed(environ, fields)
        clusters: tuple[KafkaCluster, ...] = values.get("kafka_clusters", ())
        by_cluster = {
            c.name: {
                cluster_env_name(c.name, name): fields[env_name(name)] for name in KAFKA_FIELDS
            }
            for c in clusters
        }
        known = set(fields).union(*by_cluster.values())
        unknown = sorted(k for k in environ if k.startswith(PREFIX) and k not in known)
        if unknown:
            also = " and SIDECAR_CLUSTER_<NAME>_KAFKA_* of each cluster" if clusters else ""
            raise ConfigError(
                unknown[0], f"unknown setting; known: {', '.join(sorted(fields))}{also}"
            )
        if clusters:
            values["kafka_clusters"] = tuple(
                KafkaCluster(c.name, tuple(_parsed(environ, by_cluster[c.name]).items()))
                for c in clusters
            )
        return cls(**values)

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        """(variable, default, meaning) of every setting, for ``--help`` and docs/run/service.md."""
        return [
            (env_name(f.name), _shown(f.default), f.metadata["doc"])
            for f in dataclasses.fields(cls)
        ]


# The settings that describe one Kafka cluster's connection (each cluster has its own).
KAFKA_FIELDS = frozenset(
    f.name
    for f in dataclasses.fields(Settings)
    if f.name.startswith("kafka_")
    and f.name not in ("kafka_cluster_name", "kafka_clusters", "kafka_cluster_by_group")
)


def _parsed(
    environ: Mapping[str, str], fields: Mapping[str, dataclasses.Field[Any]]
) -> dict[str, Any]:
    """The values of the ``fields`` (by variable) that ``environ`` sets, parsed."""
    values: dict[str, Any] = {}
    for variable, spec in fields.items():
        raw = environ.get(variable)
        if raw is None:
            continue
        try:
            values[spec.name] = spec.metadata["parse"](raw.strip())
        except ValueError as exc:
            raise ConfigError(variable, f"invalid value {raw!r}: {exc}") from None
    return values


def _as_env(value: Any) -> str:
    """``value`` as an environment variable would give it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, tuple):
        return ",".join(_as_env_item(item) for item in value)
    return str(value)


def _as_env_item(item: Any) -> str:
    if isinstance(item, KafkaCluster):
        return item.name
    if isinstance(item, tuple):  # key=value pairs: SASL extensions, cluster patterns
        return "=".join(str(part) for part in item)
    return str(item)


def _shown(default: Any) -> str:
    """A default as it is written in the environment (patterns comma-separated)."""
    return ",".join(default) if isinstance(default, tuple) else str(default)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def env_name(field_name: str) -> str:
    return PREFIX + field_name.upper()
