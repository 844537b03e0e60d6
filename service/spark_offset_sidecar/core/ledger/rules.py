"""The offset ledger: Flink's commit-on-checkpoint protocol for Spark queries.

Time comes in as ``now`` (seconds). Every ``decide_*`` method only reads state and returns
a ``Decision`` whose changes the caller makes durable before ``apply`` mutates the ledger.

Per query: pending checkpoints in id order, the last completed id, the one group it owns.
Per group: the owning query, the *slot* (newest completed offsets not yet committed, like
Flink's ``AtomicReference``), the commit *in flight*, the committed offsets, counters.

``Ledger`` composes the parts that hold its rules, each rule stated in full in the part:
  R1-R8, R14             events, take, results              ``core.ledger.protocol``
  R6, R8, R9, R12, R13   retry timing, commit intervals,    ``core.ledger.retries``
                         refreshes, repairs: ready heaps
  R10                    savepoints                         here, below
  R11                    replicas: the store's rows merged  ``core.ledger.merge``
                         in; which groups this one commits  ``core.ledger.retries``
  R15                    watchers: whose memory changed     ``core.ledger.watched``
A group's commit phase (slot, commit in flight) moves on an event only as the table
``core.ledger.transitions.TRANSITIONS`` allows: each is checked as it is applied.

  R10 durability Changes are applied before they are durable only under a savepoint: until
                 it is kept (written) or rolled back (the write failed; the ledger is
                 as if the decision never happened), its group is *held* and not taken, so
                 no commit ever carries offsets that a failed write took back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.ledger.changes import (
    CheckpointAdded,
    CheckpointCompleted,
    Decision,
    QueryRegistered,
    QueryReleased,
)
from spark_offset_sidecar.core.ledger.merge import Replica
from spark_offset_sidecar.core.ledger.protocol import (
    DEFAULT_MAX_PENDING,
    Protocol,
    unknown_query,
)
from spark_offset_sidecar.core.ledger.retries import Retries, checkpoints_behind
from spark_offset_sidecar.core.ledger.state import (
    CommittedOffsets,
    GroupCounters,
    GroupPhase,
    GroupState,
    QueryState,
    counter_copy,
)
from spark_offset_sidecar.core.ledger.watched import MemoryWatch


@dataclass(frozen=True)
class Savepoint:
    """What one decision may change, as it was before (None: did not exist)."""

    query_id: str | None
    query: QueryState | None
    group_id: str | None
    group: GroupState | None
    unattributed: Counter[str]


class Ledger:
    def __init__(
        self,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        backoff: Backoff | None = None,
        refresh_after: float | None = None,
        commit_interval: float = 0.0,
        queries: Iterable[QueryState] = (),
        groups: Iterable[GroupState] = (),
    ) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        self.max_pending = max_pending
        self.backoff = backoff or Backoff(initial=0.5, cap=30.0)
        self.refresh_after = refresh_after
        self.commit_interval = commit_interval
        self.queries: dict[str, QueryState] = {q.query_id: q for q in queries}
        self.groups: dict[str, GroupState] = {g.group_id: g for g in groups}
        self.unattributed: Counter[str] = Counter()  # outcomes with no known group
        self._held: Counter[str] = Counter()  # R10: group -> open savepoints
        self._watch = MemoryWatch()
        self._retries = Retries(
            self.groups,
            self._held,
            self._watch,
            backoff=self.backoff,
            refresh_after=refresh_after,
            commit_interval=commit_interval,
        )
        self._replica = Replica(self.queries, self.groups, self._retries.update)
        self._protocol = Protocol(self.queries, self.groups, self._held, self._retries, max_pending)
        # The parts' methods, bound: a call costs what a call of the part's method does.
        # The protocol: decisions on events, the committer's takes and results.
        self.decide_progress = self._protocol.decide_progress
        self.decide_snapshot = self._protocol.decide_snapshot
        self.decide_complete = self._protocol.decide_complete
        self.decide_release = self._protocol.decide_release
        self.decide_commit_interval = self._protocol.decide_commit_interval
        self.decide_allow_rewind = self._protocol.decide_allow_rewind
        self.take = self._protocol.take
        self.commit_result = self._protocol.commit_result
        self.apply_change = self._protocol.apply_change
        # Retries: when groups are ready (R6, R8, R9, R12, R13), which this one commits.
        self.ready_groups = self._retries.ready_groups
        self.next_retry_at = self._retries.next_retry_at
        self.interval_of = self._retries.interval_of
        self.ready_at = self._retries.ready_at
        self.waiting_for_interval = self._retries.waiting_for_interval
        self.repair = self._retries.repair
        self.commit_only = self._retries.commit_only
        self.commits = self._retries.commits
        # Replicas: the store's rows merged in (R11); watchers (R15).
        self.refresh = self._replica.refresh
        self.follow_memory = self._watch.follow
        self.memory_changes = self._watch.take

    @property
    def committing(self) -> frozenset[str] | None:
        """R11: the groups this replica commits (None: every group)."""
        committing = self._retries.committing
        return None if committing is None else frozenset(committing)

    @property
    def memory_changed(self) -> set[str] | None:
        """R15: the groups whose memory changed since last read; None until followed."""
        return self._watch.changed

    # --- savepoints (R10) ---------------------------------------------------------------

    def savepoint(self, decision: Decision) -> Savepoint:
        """Take before ``apply(decision)``; then ``keep`` or ``rollback`` it exactly once.
        Savepoints of one batch are rolled back newest first."""
        query_id = decision.query_id
        group_id = decision.group_id
        for change in decision.changes:
            if isinstance(change, QueryRegistered | QueryReleased):
                query_id, group_id = change.query_id, change.group_id
            elif isinstance(change, CheckpointAdded | CheckpointCompleted):
                query_id, group_id = change.checkpoint.query_id, change.checkpoint.group_id
        query = self.queries.get(query_id) if query_id is not None else None
        group = self.groups.get(group_id) if group_id is not None else None
        if group_id is not None:
            self._held[group_id] += 1
        return Savepoint(
            query_id,
            query.copy() if query else None,
            group_id,
            group.copy() if group else None,
            counter_copy(self.unattributed),
        )

    def keep(self, savepoint: Savepoint) -> None:
        """The decision's changes are durable: its group may be taken again."""
        self._release_hold(savepoint.group_id)

    def rollback(self, savepoint: Savepoint) -> None:
        """Undo the decision applied after ``savepoint`` (and after it, nothing else that
        touched its query or group but later savepoints, rolled back first)."""
        if savepoint.query_id is not None:
            if savepoint.query is None:
                self.queries.pop(savepoint.query_id, None)
            else:
                self.queries[savepoint.query_id] = savepoint.query
        if savepoint.group_id is not None:
            if savepoint.group is None:
                self.groups.pop(savepoint.group_id, None)
            else:
                self.groups[savepoint.group_id] = savepoint.group
            self._retries.update(savepoint.group_id)
        self.unattributed = savepoint.unattributed
        self._release_hold(savepoint.group_id)

    def _release_hold(self, group_id: str | None) -> None:
        if group_id is not None:
            self._held[group_id] -= 1
            if self._held[group_id] <= 0:
                del self._held[group_id]

    # --- applying ----------------------------------------------------------------------

    def apply(self, decision: Decision) -> None:
        """Apply an event's decision and count its outcome."""
        apply_change = self._protocol.apply_change
        for change in decision.changes:
            apply_change(change)
        group = self.groups.get(decision.group_id or "")
        if group is not None:
            group.counters.events[decision.outcome.value] += 1
            self._watch.mark(group.group_id)
        else:
            self.unattributed[decision.outcome.value] += 1


__all__ = [
    "CommittedOffsets",
    "GroupCounters",
    "GroupPhase",
    "GroupState",
    "Ledger",
    "QueryState",
    "Savepoint",
    "checkpoints_behind",
    "unknown_query",
]
