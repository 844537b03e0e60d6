"""The ledger's state: per query and per group, plain data with no behaviour but the
derived ``GroupPhase`` (its transitions: ``core.ledger.transitions``)."""

from __future__ import annotations

import enum
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TypeVar

from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.offsets import OffsetMap


class GroupPhase(enum.Enum):
    IDLE = "idle"
    READY = "ready"
    IN_FLIGHT = "in_flight"
    IN_FLIGHT_NEXT = "in_flight_next"


@dataclass
class QueryState:
    query_id: str
    group_id: str
    registered_at: float
    pending: dict[int, Checkpoint] = field(default_factory=dict)  # ascending ids
    last_completed_id: int | None = None
    last_run_id: str | None = None

    def copy(self) -> QueryState:
        """A copy that later changes to this one do not reach (checkpoints are frozen)."""
        copied = _shallow(self)
        copied.pending = dict(self.pending)
        return copied


@dataclass(frozen=True)
class CommittedOffsets:
    query_id: str
    checkpoint_id: int
    offsets: OffsetMap
    at: float


@dataclass
class GroupCounters:
    succeeded: int = 0
    skipped: int = 0
    failed: Counter[str] = field(default_factory=Counter)  # by reason
    events: Counter[str] = field(default_factory=Counter)  # by Outcome value
    pending_dropped: int = 0
    held_back: int = 0  # partitions not rewound
    refreshed: int = 0  # successful commits of unchanged offsets of an idle group (R9)

    def copy(self) -> GroupCounters:
        """A copy that later counts do not reach (every report of a group takes one)."""
        copied = _shallow(self)
        copied.failed = counter_copy(self.failed)
        copied.events = counter_copy(self.events)
        return copied


_State = TypeVar("_State")


def _shallow(state: _State) -> _State:
    """A new instance of ``state``'s class with the same field values (every event's
    savepoint takes two: ``dataclasses.replace`` would run ``__init__`` and look its
    fields up again, at twice the cost)."""
    copied: _State = object.__new__(type(state))
    copied.__dict__.update(state.__dict__)
    return copied


def counter_copy(counts: Counter[str]) -> Counter[str]:
    """A copy of ``counts``, made as a dict is (a Counter's ``__init__`` and ``update``
    check every item; these are counts already)."""
    copied: Counter[str] = Counter.__new__(Counter)
    dict.update(copied, counts)
    return copied


@dataclass
class GroupState:
    group_id: str
    query_id: str | None = None  # owner; None once released
    slot: Checkpoint | None = None
    in_flight: CommitRequest | None = None
    committed: CommittedOffsets | None = None
    failures: int = 0  # consecutive, for backoff
    retry_at: float = 0.0
    last_failure: str | None = None
    rewind_allowed: bool = False
    commit_interval: float | None = None  # R13: this group's own; None: the ledger's default
    cluster: str | None = None  # R14: the Kafka cluster it commits to; None: the default one
    # R13: when its last commit was taken (memory only; -inf: none yet, the next is not held)
    interval_from: float = -math.inf
    counters: GroupCounters = field(default_factory=GroupCounters)

    def copy(self) -> GroupState:
        """A copy that later changes to this one do not reach (the rest is immutable)."""
        copied = _shallow(self)
        copied.counters = self.counters.copy()
        return copied

    @property
    def phase(self) -> GroupPhase:
        if self.in_flight is None:
            return GroupPhase.IDLE if self.slot is None else GroupPhase.READY
        return GroupPhase.IN_FLIGHT if self.slot is None else GroupPhase.IN_FLIGHT_NEXT
