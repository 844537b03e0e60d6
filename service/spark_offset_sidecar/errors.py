"""Errors of the sidecar, one hierarchy (every class is drawn here; a test keeps it so):

SidecarError
├── ConfigError            a setting is missing or invalid (names the variable)
├── InvalidEvent           an event is malformed (names the field); nothing stored
├── Refused                the caller may not do this (HTTP 401 / 403 / 429)
│   ├── Unauthenticated        no token, or not a known one (401)
│   ├── Forbidden              a known token outside its grant (403)
│   └── RateLimited            a token over its events per second (429, Retry-After)
├── StoreError             the database failed (a bug: a constraint the ledger should keep)
│   ├── StoreUnavailable   cannot read or write now: 503, retried; nothing half-written
│   │   └── WriteOutcomeUnknown  the writer ended before answering; carries the rows
│   ├── StoreRefused       the database cannot hold a value of the write: 422, that event
│   └── SchemaFromNewerRelease  the database is at a migration this release does not know
├── OffsetsNotFound        Kafka holds no committed offsets where some were needed
├── KafkaReadError         reading from Kafka failed (admin reads, log ends); says why
├── TokenUnavailable       no OAUTHBEARER token for Kafka; names the cause, never the secret
├── IdentityUnavailable    a job's token cannot be checked now (no issuer keys): 503
├── UnreadableCheckpoint   a Spark checkpoint file is not what Spark writes: file and line
│   └── CheckpointFileMissing  no ``metadata``, or ``commits/N`` without ``offsets/N``
├── CheckpointReadError    a checkpoint folder could not be read now (unreachable, denied)
├── WatcherUnavailable     the watcher does not answer now (starting, restarting): 503
├── TransitionError        a commit phase change ``core.ledger.transitions`` refuses (a bug)
└── CommitError            a commit to Kafka did not happen; ``reason``: a metric label
    ├── CommitTimeout          no answer within the commit timeout
    ├── CoordinatorNotAvailable  no coordinator within the timeout (a new broker)
    ├── GroupHasMembers        the group has active members (UNKNOWN_MEMBER_ID)
    ├── BrokerUnavailable      no connection to the cluster or coordinator
    ├── AuthenticationFailed   Kafka refused the SASL credentials
    ├── TlsFailed              TLS with Kafka failed (an untrusted certificate, ...)
    ├── NotAuthorized          the broker refused (group or topic ACL)
    └── UnknownTopicPartition  a committed partition does not exist

How each becomes an HTTP answer is one table: ``http.refusals.exception_answers``.
Every message that quotes input passes it through ``shown`` first, so that an error can be
answered as JSON, logged and stored whatever the input held.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "spark-offset-sidecar"


def install_extra(extra: str) -> str:
    """How to install the extra ``extra`` at the installed version (index or wheel)."""
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a source tree that was not installed
        version = "<version>"
    return (
        f"install the {extra} extra: pip install '{DISTRIBUTION}[{extra}]=={version}' "
        f"(air-gapped, the release folder's wheel: pip install "
        f"'spark_offset_sidecar-{version}-py3-none-any.whl[{extra}]')"
    )


def shown(text: str) -> str:
    """``text`` as every answer, log line and database can hold it: each lone surrogate
    (not Unicode text; UTF-8 cannot encode it) written as its escape, ``\\udc80``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class SidecarError(Exception):
    pass


class ConfigError(SidecarError):
    def __init__(self, variable: str, problem: str) -> None:
        problem = shown(problem)
        super().__init__(f"{variable}: {problem}")
        self.variable = variable
        self.problem = problem


class InvalidEvent(SidecarError):
    def __init__(self, field: str, problem: str) -> None:
        field, problem = shown(field), shown(problem)
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class Refused(SidecarError):
    pass


class Unauthenticated(Refused):
    """No known token. ``challenge``: the ``WWW-Authenticate`` answer (``Basic`` for the
    status page, so that a browser asks for the token)."""

    def __init__(self, message: str, *, challenge: str = "Bearer") -> None:
        super().__init__(message)
        self.challenge = challenge


class Forbidden(Refused):
    pass


class RateLimited(Refused):
    def __init__(self, name: str, retry_after: float) -> None:
        super().__init__(f"token {name!r} is over its rate; retry in {retry_after:.1f} s")
        self.retry_after = retry_after


class StoreError(SidecarError):
    pass


class StoreUnavailable(StoreError):
    pass


class WriteOutcomeUnknown(StoreUnavailable):
    def __init__(self, message: str, stored: object) -> None:
        super().__init__(message)
        # A ``ports.store.LoadedRows`` or None; typed loosely: this module imports nothing.
        self.stored = stored


class StoreRefused(StoreError):
    pass


class SchemaFromNewerRelease(StoreError):
    """A newer release migrated the database: refused at start (docs/run/upgrade.md)."""

    def __init__(self, database: str, revision: str, newest: str, release: str) -> None:
        super().__init__(
            f"database {database} is at migration {revision}, which release {release} does "
            f"not know (its newest migration is {newest}): a newer release has migrated it. "
            f"Nothing was changed. Run that newer release (or a later one) against this "
            f"database, or, to go back to {release}, restore the backup taken before the "
            "upgrade (docs/run/upgrade.md)"
        )
        self.revision = revision
        self.newest = newest
        self.release = release


class OffsetsNotFound(SidecarError):
    pass


class KafkaReadError(SidecarError):
    pass


class TokenUnavailable(SidecarError):
    pass


class IdentityUnavailable(SidecarError):
    pass


class UnreadableCheckpoint(SidecarError):
    reason = "unreadable_file"

    def __init__(self, path: str, line: int, problem: str) -> None:
        path, problem = shown(path), shown(problem)
        super().__init__(f"{path}, line {line}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class CheckpointFileMissing(UnreadableCheckpoint):
    reason = "missing_file"


class CheckpointReadError(SidecarError):
    """``reason``: ``unreachable`` (network, server, timeouts) or ``denied``."""

    def __init__(self, path: str, reason: str, detail: str) -> None:
        path = shown(path)
        super().__init__(f"{path}: {shown(detail)}")
        self.path = path
        self.reason = reason


class WatcherUnavailable(SidecarError):
    pass


class TransitionError(SidecarError):
    pass


class CommitError(SidecarError):
    reason = "kafka_error"


class CommitTimeout(CommitError):
    reason = "timeout"


class CoordinatorNotAvailable(CommitError):
    reason = "coordinator_not_available"


class GroupHasMembers(CommitError):
    reason = "group_has_members"


class BrokerUnavailable(CommitError):
    reason = "broker_unavailable"


class AuthenticationFailed(CommitError):
    reason = "authentication_failed"


class TlsFailed(CommitError):
    reason = "tls_failed"


class NotAuthorized(CommitError):
    reason = "not_authorized"


class UnknownTopicPartition(CommitError):
    reason = "unknown_topic_or_partition"


# A commit that crashed on something that is not a CommitError (a bug): counted, retried.
INTERNAL_FAILURE = "internal_error"

# Every reason a failed commit is counted by (sidecar_commits_failed_by_reason_total).
COMMIT_FAILURE_REASONS = frozenset(
    {INTERNAL_FAILURE, CommitError.reason, *(c.reason for c in CommitError.__subclasses__())}
)
