"""What the ledger decides: an outcome for the caller and the changes to make durable
before ``Ledger.apply``. Each change is a fact stated in full (no reference to the state
it was decided on): the store persists it without reading the ledger, and a restart
replays what is on disk."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from spark_offset_sidecar.core.offsets import OffsetMap, TopicPartition


class Outcome(enum.Enum):
    """What happened to an event, in words a caller can act on."""

    ACCEPTED = "accepted"  # stored; will be (or was) acted on
    DUPLICATE = "duplicate"  # already had exactly this; nothing changed
    STALE = "stale"  # older than what the query already completed; nothing changed
    IGNORED = "ignored"  # nothing to commit in it (no Kafka source); nothing changed
    UNKNOWN_CHECKPOINT = "unknown_checkpoint"  # complete(N) for an N not pending
    UNKNOWN_QUERY = "unknown_query"  # no such query
    CONFLICT = "conflict"  # contradicts what is stored (group owned elsewhere, offsets differ)


@dataclass(frozen=True)
class Checkpoint:
    """Offsets a query reached at one checkpoint (= Spark batch id)."""

    query_id: str
    group_id: str
    checkpoint_id: int
    run_id: str | None
    offsets: OffsetMap
    created_at: float


@dataclass(frozen=True)
class CommitRequest:
    """One commit handed to the committer; at most one per group exists at a time."""

    checkpoint: Checkpoint  # the slot entry being committed
    offsets: OffsetMap  # what is sent: the checkpoint's offsets, some held back (R7)
    attempt: int
    # Partitions whose checkpoint offset was below the committed one: held at the
    # committed offset instead (no rewind without an operator's permission).
    held_back: tuple[TopicPartition, ...] = ()
    rewind: bool = False  # made under an operator's one-time permission to rewind
    refresh: bool = False  # the same offsets again, before Kafka's retention drops them
    # With replicas: the owner epoch under which this replica took the commit; its success
    # is recorded only while the replica still holds the group at that epoch (the fence).
    fence: int | None = None
    cluster: str | None = None  # R14: the group's Kafka cluster (None: the default one)

    @property
    def group_id(self) -> str:
        return self.checkpoint.group_id

    @property
    def query_id(self) -> str:
        return self.checkpoint.query_id

    @property
    def checkpoint_id(self) -> int:
        return self.checkpoint.checkpoint_id


# --- changes -------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryRegistered:
    """``query_id`` now owns ``group_id`` (and no other query may commit to it); a new
    group commits to Kafka cluster ``cluster`` (R14; None: the default one)."""

    query_id: str
    group_id: str
    at: float
    cluster: str | None = None


@dataclass(frozen=True)
class CheckpointAdded:
    """A pending snapshot (Flink ``snapshotState``); ``dropped`` ids fell off the bound
    or were replaced by this one."""

    checkpoint: Checkpoint
    dropped: tuple[int, ...] = ()


@dataclass(frozen=True)
class CheckpointCompleted:
    """``checkpoint`` completed: it and every older pending entry leave the queue, and
    its offsets go into the group's slot, replacing an uncommitted older entry."""

    checkpoint: Checkpoint
    at: float


@dataclass(frozen=True)
class CommitStarted:
    request: CommitRequest


@dataclass(frozen=True)
class CommitSucceeded:
    """Kafka accepted ``request``; ``committed`` is the group's committed offsets now: the
    previous ones with the request's on top (a partition the newest checkpoint does not
    name keeps its offset)."""

    request: CommitRequest
    at: float
    committed: OffsetMap


@dataclass(frozen=True)
class CommitFailed:
    request: CommitRequest
    reason: str
    at: float
    retry_at: float


@dataclass(frozen=True)
class QueryReleased:
    """An operator forgot ``query_id``: its pending entries and slot are gone and its
    group is free for another query. Offsets already committed in Kafka stay."""

    query_id: str
    group_id: str


@dataclass(frozen=True)
class RewindAllowed:
    """An operator allows the next commit of ``group_id`` to move partitions backwards."""

    group_id: str


@dataclass(frozen=True)
class CommitIntervalSet:
    """An operator sets ``group_id``'s minimum time between commits (None: the service's
    default, ``SIDECAR_MIN_COMMIT_INTERVAL_SECONDS``)."""

    group_id: str
    seconds: float | None


Change = (
    QueryRegistered
    | CheckpointAdded
    | CheckpointCompleted
    | CommitStarted
    | CommitSucceeded
    | CommitFailed
    | QueryReleased
    | RewindAllowed
    | CommitIntervalSet
)


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    detail: str
    query_id: str | None = None
    group_id: str | None = None
    checkpoint_id: int | None = None
    changes: tuple[Change, ...] = field(default=())
