"""What a group's owner knows of it beyond the stored ledger, as of one evaluation of the
lag monitor: its status and how its commits go. With replicas, owners publish these on
the status board (``ports.status_board``), so that every replica answers alike.

Invariants
  - A report is a snapshot: nothing in it refers to the ledger's living objects.
  - ``counters`` count what the reporting replica did and saw since it took the group
    (commits) or since it started (events); they start again after a failover.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_offset_sidecar.core.lag.figures import DATA_SEVERITY, DataStatus, GroupLag
from spark_offset_sidecar.core.lag.status import SEVERITY, GroupStatus, Status
from spark_offset_sidecar.core.ledger.state import GroupCounters, GroupState
from spark_offset_sidecar.core.offsets import OffsetMap


@dataclass(frozen=True)
class CommitUnderway:
    """The commit the owner has handed to Kafka and not heard back from."""

    checkpoint_id: int
    offsets: OffsetMap
    attempt: int


@dataclass(frozen=True)
class LiveCommits:
    """The part of a group's state that only its owner's memory holds."""

    in_flight: CommitUnderway | None
    retry_at: float | None  # while failures are backed off
    last_failure: str | None
    counters: GroupCounters
    # Why the commit in flight has no answer yet, as the committer sees it now (its
    # coordinator cannot be reached); None when nothing is known to hold it.
    waiting: str | None = None


@dataclass(frozen=True)
class FolderReport:
    """How reading one followed checkpoint folder of the group goes, on the replica that
    reads it (``runtime.checkpoint_follower``)."""

    path: str
    query_id: str | None  # in the folder's metadata
    newest_batch_in_folder: int | None
    last_batch_recorded: int | None
    pending_batch: int | None
    behind_seconds: float  # how long a completed batch has waited unrecorded
    errors: tuple[tuple[str, int], ...]  # failed polls by reason, by reason
    last_error: str | None
    last_poll_at: float | None  # wall clock of the last good poll


# A group no report was published of yet: nothing known in flight, failed or counted.
NOT_REPORTED = LiveCommits(
    in_flight=None, retry_at=None, last_failure=None, counters=GroupCounters()
)


@dataclass(frozen=True)
class GroupReport:
    status: GroupStatus
    live: LiveCommits
    pending: int  # the owning query's pending checkpoints
    evaluated_at: float  # the lag monitor's evaluation this report comes from
    log_ends_read_at: float | None  # the log ends that evaluation judged on
    reported_by: str | None = None  # the replica that published it (None: this process)
    folders: tuple[FolderReport, ...] = ()  # the group's followed folders read here
    lag: GroupLag | None = None  # time lag, data at risk, catch-up (None: not evaluated)
    cluster: str | None = None  # its Kafka cluster, as the ledger keeps it (None: default)


def live_of(group: GroupState, waiting: str | None = None) -> LiveCommits:
    """The live part of ``group``'s state; ``waiting`` (the committer's word on the commit
    in flight) is kept only while a commit is in flight."""
    flight = group.in_flight
    return LiveCommits(
        in_flight=CommitUnderway(flight.checkpoint.checkpoint_id, flight.offsets, flight.attempt)
        if flight is not None
        else None,
        retry_at=group.retry_at if group.failures else None,
        last_failure=group.last_failure,
        counters=group.counters.copy(),
        waiting=waiting if flight is not None else None,
    )


def report_of(
    status: GroupStatus,
    group: GroupState,
    pending: int,
    evaluated_at: float,
    log_ends_read_at: float | None,
    reported_by: str | None = None,
    folders: tuple[FolderReport, ...] = (),
    lag: GroupLag | None = None,
    waiting: str | None = None,
) -> GroupReport:
    return GroupReport(
        status,
        live_of(group, waiting),
        pending,
        evaluated_at,
        log_ends_read_at,
        reported_by,
        folders,
        lag,
        group.cluster,
    )


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """What ranks, filters and counts a group in a list (``/ui``) without its report, so
    that a page builds the reports of the groups it shows only."""

    group_id: str
    status: Status
    data_status: DataStatus | None  # None: its lag figures not evaluated yet
    lag_seconds: float | None
    total_lag: int | None
    evaluated_at: float
    log_ends_read_at: float | None
    # Its place in a list, the worst first (the least rank): by status, then data status,
    # then time lag, then lag in records, then name. Computed once, compared in C.
    rank: tuple[int, int, float, int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        data = DATA_SEVERITY.index(self.data_status) if self.data_status is not None else 0
        rank = (
            -SEVERITY.index(self.status),
            -data,
            -(self.lag_seconds or 0.0),
            -(self.total_lag or 0),
            self.group_id,
        )
        object.__setattr__(self, "rank", rank)


def summary(
    status: GroupStatus,
    lag: GroupLag | None,
    evaluated_at: float,
    log_ends_read_at: float | None,
) -> GroupSummary:
    """The summary of the group whose figures these are."""
    return GroupSummary(
        status.group_id,
        status.status,
        lag.data_status if lag is not None else None,
        lag.lag_seconds if lag is not None else None,
        status.total_lag,
        evaluated_at,
        log_ends_read_at,
    )


def summary_of(report: GroupReport) -> GroupSummary:
    return summary(report.status, report.lag, report.evaluated_at, report.log_ends_read_at)
