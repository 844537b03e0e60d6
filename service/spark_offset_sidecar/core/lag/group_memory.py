"""What only the process taking events knows of a group (its counters, commit in flight,
failures, retry time, the job's pace, its last commit as Kafka answered it), told to its
watcher (a memory update, ``runtime.memory_relay``) so that the watcher evaluates and
reports the group as the process taking events would.

Invariants
  - A memory is a snapshot: nothing in it refers to the teller's living objects.
  - ``remember`` sets only memory's fields, and the committed offsets when the sent ones
    are newer (M2 of ``core.ledger.merge``): what the store holds of the group stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_offset_sidecar.core.lag.figures import JobRates
from spark_offset_sidecar.core.ledger.changes import CommitRequest
from spark_offset_sidecar.core.ledger.merge import newer
from spark_offset_sidecar.core.ledger.retries import checkpoints_behind
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupCounters, GroupState


@dataclass(frozen=True)
class GroupMemory:
    failures: int  # consecutive, since the last success or newer completion
    retry_at: float
    last_failure: str | None
    counters: GroupCounters
    in_flight: CommitRequest | None
    waiting: str | None = None  # what the commit in flight waits for (the committer's word)
    job: JobRates | None = None  # the job's last progress event's figures
    committed: CommittedOffsets | None = None  # the last commit Kafka took, as it answered
    cluster: str | None = None  # its Kafka cluster (R14): its series' label
    behind: int = 0  # completed checkpoints its commits trail the newest by (R13)
    waiting_since: float | None = None  # when the checkpoint waiting uncommitted completed


def memory_of(group: GroupState, waiting: str | None, job: JobRates | None) -> GroupMemory:
    return GroupMemory(
        group.failures,
        group.retry_at,
        group.last_failure,
        group.counters.copy(),
        group.in_flight,
        waiting if group.in_flight is not None else None,
        job,
        group.committed,
        group.cluster,
        checkpoints_behind(group),
        None if group.slot is None else group.slot.created_at,
    )


def remember(group: GroupState, memory: GroupMemory) -> None:
    """``group`` (a watcher's, as its store holds it) takes the teller's memory of it."""
    group.failures = memory.failures
    group.retry_at = memory.retry_at
    group.last_failure = memory.last_failure
    group.counters = memory.counters.copy()
    group.in_flight = memory.in_flight
    group.committed = newer(group.committed, memory.committed)
