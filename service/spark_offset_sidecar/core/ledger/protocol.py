"""The commit-on-checkpoint protocol: what an event decides (snapshot, completion,
release), the commit a group's slot is taken as, and how each change is applied, every
change of a group's commit phase checked against ``core.ledger.transitions``.

Rules held here
  R1 ownership   A query commits to one group; a group belongs to one query. An event that
                 would break either is CONFLICT and changes nothing.
  R2 order/bound Pending checkpoints are kept in id order; past ``max_pending`` the oldest
                 are dropped and counted.
  R3 stale       An event for an id <= the query's last completed id changes nothing:
                 DUPLICATE when equal, STALE when older.
  R4 identity    Snapshotting a pending id again: same offsets -> DUPLICATE; other offsets ->
                 CONFLICT in the same run, replacement from another run (a restarted run
                 re-plans the batch).
  R5 completion  complete(N) of a pending N removes N and every older entry and puts N in
                 the group's slot; an uncommitted entry there is replaced (counted skipped).
                 complete(N) of an unknown N changes nothing (counted).
  R6 in flight   take() hands out the slot only when no commit of the group is in flight and
                 its retry time has come: at most one commit per group in flight.
  R7 no rewind   A partition is never committed below its committed offset unless an
                 operator allowed one rewind; it is held at the committed offset instead.
  R8 results     Success records the committed offsets. Failure puts the offsets back in
                 the slot for a retry after backoff (an idle query sends nothing newer), unless
                 a newer entry is already there, which supersedes them.
  R14 cluster    A group commits to one Kafka cluster, fixed when it is first registered
                 (None: the service's default cluster). An event whose job names another
                 cluster for it is CONFLICT; one that names none takes the group's.
Timing (R6's retry time, R8's backoff, R9, R12, R13) is ``core.ledger.retries``'.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from spark_offset_sidecar.core.clusters import DEFAULT_CLUSTER, ClusterOf
from spark_offset_sidecar.core.ledger.changes import (
    Change,
    Checkpoint,
    CheckpointAdded,
    CheckpointCompleted,
    CommitFailed,
    CommitIntervalSet,
    CommitRequest,
    CommitStarted,
    CommitSucceeded,
    Decision,
    Outcome,
    QueryRegistered,
    QueryReleased,
    RewindAllowed,
)
from spark_offset_sidecar.core.ledger.retries import Retries
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState, QueryState
from spark_offset_sidecar.core.ledger.transitions import Event, column, index, refused
from spark_offset_sidecar.core.offsets import OffsetMap, TopicPartition, describe

DEFAULT_MAX_PENDING = 100  # Flink's FlinkKafkaConsumerBase.MAX_NUM_PENDING_CHECKPOINTS

# The transition table's columns: each change of a phase is checked against one.
_COMPLETE, _TAKE, _SUCCESS = column(Event.COMPLETE), column(Event.TAKE), column(Event.SUCCESS)
_FAILURE, _FAILURE_OWNER_GONE = column(Event.FAILURE), column(Event.FAILURE_OWNER_GONE)
_RELEASE = column(Event.RELEASE)


def _cluster(name: str | None) -> str:
    return "the default Kafka cluster" if name is None else f"Kafka cluster {name!r}"


def _where(query_id: str, group_id: str, checkpoint_id: int | None = None) -> dict[str, Any]:
    """What a decision is about, as ``Decision``'s fields."""
    return {"query_id": query_id, "group_id": group_id, "checkpoint_id": checkpoint_id}


def unknown_query(query_id: str, **where: Any) -> Decision:
    """The answer about a query that is not known. The HTTP layer gives the same answer
    for a query the caller may not see, so that the two cannot be told apart."""
    return Decision(
        Outcome.UNKNOWN_QUERY, f"no query {query_id} is known", query_id=query_id, **where
    )


class Protocol:
    def __init__(
        self,
        queries: dict[str, QueryState],
        groups: dict[str, GroupState],
        held: Counter[str],
        retries: Retries,
        max_pending: int,
    ) -> None:
        self.queries = queries
        self.groups = groups
        self._held = held
        self._retries = retries
        self.max_pending = max_pending

    def decide_progress(
        self,
        query_id: str,
        group_id: str,
        run_id: str | None,
        batch_id: int,
        offsets: OffsetMap,
        now: float,
        cluster: ClusterOf = DEFAULT_CLUSTER,
    ) -> Decision:
        """A Spark progress event: snapshot and completion of ``batch_id`` at once."""
        admitted = self._admit(query_id, group_id, batch_id, offsets, now, cluster)
        if isinstance(admitted, Decision):
            return admitted
        checkpoint = Checkpoint(query_id, group_id, batch_id, run_id, dict(offsets), now)
        return Decision(
            Outcome.ACCEPTED,
            f"batch {batch_id} completed; {describe(offsets)} queued for commit",
            query_id,
            group_id,
            batch_id,
            changes=(*admitted, CheckpointCompleted(checkpoint, now)),
        )

    def decide_snapshot(
        self,
        query_id: str,
        group_id: str,
        checkpoint_id: int,
        run_id: str | None,
        offsets: OffsetMap,
        now: float,
        cluster: ClusterOf = DEFAULT_CLUSTER,
    ) -> Decision:
        """A pending snapshot (Flink ``snapshotState``), to be completed later."""
        claimed = self._admit(query_id, group_id, checkpoint_id, offsets, now, cluster)
        if isinstance(claimed, Decision):
            return claimed
        where = _where(query_id, group_id, checkpoint_id)
        query = self.queries.get(query_id)
        pending = query.pending if query else {}
        checkpoint = Checkpoint(query_id, group_id, checkpoint_id, run_id, dict(offsets), now)
        existing = pending.get(checkpoint_id)
        if existing is not None:
            if existing.offsets == checkpoint.offsets:
                return Decision(
                    Outcome.DUPLICATE, f"checkpoint {checkpoint_id} is already pending", **where
                )
            if existing.run_id == run_id:
                return Decision(
                    Outcome.CONFLICT,
                    f"checkpoint {checkpoint_id} is already pending with other offsets "
                    f"({describe(existing.offsets)}) from the same run",
                    **where,
                )
            added = CheckpointAdded(checkpoint, dropped=(checkpoint_id,))
            detail = f"checkpoint {checkpoint_id} of run {existing.run_id} replaced"
        else:
            overflow = len(pending) + 1 - self.max_pending
            dropped = tuple(sorted(pending)[:overflow]) if overflow > 0 else ()
            added = CheckpointAdded(checkpoint, dropped=dropped)
            detail = f"checkpoint {checkpoint_id} pending"
            if dropped:
                detail += f"; oldest pending {list(dropped)} dropped (at most {self.max_pending})"
        return Decision(Outcome.ACCEPTED, detail, changes=(*claimed, added), **where)

    def decide_complete(self, query_id: str, checkpoint_id: int, now: float) -> Decision:
        """Flink ``notifyCheckpointComplete(checkpoint_id)``."""
        query = self.queries.get(query_id)
        if query is None:
            return unknown_query(query_id, checkpoint_id=checkpoint_id)
        where = _where(query_id, query.group_id, checkpoint_id)
        stale = self._stale(query_id, checkpoint_id, where)
        if stale is not None:
            return stale
        checkpoint = query.pending.get(checkpoint_id)
        if checkpoint is None:
            return Decision(
                Outcome.UNKNOWN_CHECKPOINT,
                f"checkpoint {checkpoint_id} is not pending (pending: {list(query.pending)})",
                **where,
            )
        return Decision(
            Outcome.ACCEPTED,
            f"checkpoint {checkpoint_id} completed; {describe(checkpoint.offsets)} queued",
            changes=(CheckpointCompleted(checkpoint, now),),
            **where,
        )

    def decide_release(self, query_id: str) -> Decision:
        query = self.queries.get(query_id)
        if query is None:
            return unknown_query(query_id)
        return Decision(
            Outcome.ACCEPTED,
            f"query {query_id} forgotten; group {query.group_id} is free",
            query_id=query_id,
            group_id=query.group_id,
            changes=(QueryReleased(query_id, query.group_id),),
        )

    def decide_commit_interval(self, group_id: str, seconds: float | None) -> Decision:
        """R13: ``group_id``'s own commit interval (None: back to the default)."""
        if group_id not in self.groups:
            return Decision(Outcome.UNKNOWN_QUERY, f"no group {group_id} is known")
        said = "the default" if seconds is None else f"{seconds:g} s"
        return Decision(
            Outcome.ACCEPTED,
            f"group {group_id} commits at most once per {said}",
            group_id=group_id,
            changes=(CommitIntervalSet(group_id, seconds),),
        )

    def decide_allow_rewind(self, group_id: str) -> Decision:
        if group_id not in self.groups:
            return Decision(Outcome.UNKNOWN_QUERY, f"no group {group_id} is known")
        return Decision(
            Outcome.ACCEPTED,
            f"the next commit of {group_id} may move partitions backwards",
            group_id=group_id,
            changes=(RewindAllowed(group_id),),
        )

    def _admit(
        self,
        query_id: str,
        group_id: str,
        checkpoint_id: int,
        offsets: OffsetMap,
        now: float,
        cluster: ClusterOf,
    ) -> Decision | tuple[Change, ...]:
        """The refusal of a new checkpoint (nothing to commit, R1, R3), or the changes that
        admitting it starts with (a registration for a new query)."""
        where = _where(query_id, group_id, checkpoint_id)
        if not offsets:
            return Decision(Outcome.IGNORED, "no Kafka offsets in it", **where)
        claimed = self._claim(query_id, group_id, now, cluster)
        if isinstance(claimed, Decision):
            return claimed
        return self._stale(query_id, checkpoint_id, where) or claimed

    def _claim(
        self, query_id: str, group_id: str, now: float, cluster: ClusterOf
    ) -> Decision | tuple[Change, ...]:
        """R1, R14: the registration to add, or the CONFLICT that refuses the event."""
        where = _where(query_id, group_id)
        query = self.queries.get(query_id)
        if query is not None and query.group_id != group_id:
            return Decision(
                Outcome.CONFLICT,
                f"query {query_id} commits to group {query.group_id!r}, not {group_id!r}; "
                "release the query first to move it",
                **where,
            )
        group = self.groups.get(group_id)
        if group is not None and group.query_id not in (None, query_id):
            return Decision(
                Outcome.CONFLICT,
                f"group {group_id!r} belongs to query {group.query_id}; two queries on one "
                "group would overwrite each other's offsets",
                **where,
            )
        if group is not None and cluster.named and group.cluster != cluster.name:
            return Decision(
                Outcome.CONFLICT,
                f"group {group_id!r} commits to {_cluster(group.cluster)}, not "
                f"{_cluster(cluster.name)}; a group's offsets live on one cluster",
                **where,
            )
        if query is not None:
            return ()
        new = cluster.name if group is None else group.cluster
        return (QueryRegistered(query_id, group_id, now, new),)

    def _stale(self, query_id: str, checkpoint_id: int, where: dict[str, Any]) -> Decision | None:
        """R3."""
        query = self.queries.get(query_id)
        last = query.last_completed_id if query else None
        if last is None or checkpoint_id > last:
            return None
        if checkpoint_id == last:
            return Decision(Outcome.DUPLICATE, f"checkpoint {last} was already completed", **where)
        return Decision(
            Outcome.STALE,
            f"checkpoint {checkpoint_id} is older than completed checkpoint {last}",
            **where,
        )

    def take(
        self, group_id: str, now: float, fence: int | None = None, *, flush: bool = False
    ) -> CommitRequest | None:
        """Hand out ``group_id``'s slot as a commit, or None if R6 (or R13, unless
        ``flush``) says not now; ``fence`` is the owner epoch the commit is taken under
        (R11), None for a single replica.

        Applied at once and never persisted: until a success is recorded, the store keeps
        the entry in the slot (a crash mid-commit means committing it again)."""
        group = self.groups.get(group_id)
        if (
            group is None
            or group.in_flight is not None
            or now < group.retry_at
            or (not flush and now < self._retries.ready_at(group))
            or group_id in self._held
            or not self._retries.commits(group_id)
        ):
            return None
        slot, refresh = group.slot, False
        if slot is None:
            due = self._retries.refresh_due(group)
            if due is None or now < due or group.committed is None:
                return None
            last, refresh = group.committed, True
            slot = Checkpoint(last.query_id, group_id, last.checkpoint_id, None, last.offsets, now)
        offsets = dict(slot.offsets)
        held_back: list[TopicPartition] = []
        if group.committed is not None and not group.rewind_allowed:
            for tp, offset in slot.offsets.items():
                committed = group.committed.offsets.get(tp)
                if committed is not None and offset < committed:
                    offsets[tp] = committed
                    held_back.append(tp)
        request = CommitRequest(
            slot,
            offsets,
            attempt=group.failures + 1,
            held_back=tuple(held_back),
            rewind=group.rewind_allowed,
            refresh=refresh,
            fence=fence,
            cluster=group.cluster,
        )
        self.apply_change(CommitStarted(request))
        group.interval_from = now  # R13
        return request

    def commit_result(
        self, request: CommitRequest, now: float, failure: str | None = None
    ) -> CommitSucceeded | CommitFailed:
        """R8: the change to record; ``failure`` is None for success, else a short reason."""
        if failure is None:
            previous = self.groups[request.group_id].committed
            committed = dict(previous.offsets) if previous is not None else {}
            committed.update(request.offsets)
            return CommitSucceeded(request, now, committed)
        retry_at = now + self._retries.backoff.delay(request.attempt)
        return CommitFailed(request, failure, now, retry_at)

    def apply_change(self, change: Change) -> None:
        _APPLY[type(change)](self, change)

    def _registered(self, change: QueryRegistered) -> None:
        self.queries[change.query_id] = QueryState(change.query_id, change.group_id, change.at)
        group = self.groups.get(change.group_id)
        if group is None:
            group = self.groups[change.group_id] = GroupState(
                change.group_id, cluster=change.cluster
            )
        group.query_id = change.query_id
        self._retries.reindex(group)

    def _added(self, change: CheckpointAdded) -> None:
        checkpoint = change.checkpoint
        query = self.queries[checkpoint.query_id]
        for dropped in change.dropped:
            query.pending.pop(dropped, None)
            if dropped != checkpoint.checkpoint_id:
                self.groups[query.group_id].counters.pending_dropped += 1
        newest = max(query.pending, default=-1)
        query.pending[checkpoint.checkpoint_id] = checkpoint
        if checkpoint.checkpoint_id < newest:  # R2: keep ascending ids
            query.pending = dict(sorted(query.pending.items()))

    def _completed(self, change: CheckpointCompleted) -> None:
        checkpoint = change.checkpoint
        query = self.queries[checkpoint.query_id]
        for older in [i for i in query.pending if i <= checkpoint.checkpoint_id]:
            del query.pending[older]
        query.last_completed_id = checkpoint.checkpoint_id
        query.last_run_id = checkpoint.run_id
        group = self.groups[checkpoint.group_id]
        before = index(group)
        if group.slot is not None:
            group.counters.skipped += 1  # Flink: "Skipping commit of previous offsets"
        group.slot = checkpoint
        group.failures = 0
        group.retry_at = 0.0
        if _COMPLETE[before] != index(group):
            refused(Event.COMPLETE, before, group)
        self._retries.reindex(group)

    def _commit_started(self, change: CommitStarted) -> None:
        group = self.groups[change.request.group_id]
        before = index(group)
        group.in_flight = change.request
        group.slot = None
        if _TAKE[before] != index(group):
            refused(Event.TAKE, before, group)
        group.rewind_allowed = False
        group.counters.held_back += len(change.request.held_back)
        self._retries.reindex(group)

    def _commit_succeeded(self, change: CommitSucceeded) -> None:
        request = change.request
        group = self.groups[request.group_id]
        if group.in_flight == request:
            before = index(group)
            group.in_flight = None
            if _SUCCESS[before] != index(group):
                refused(Event.SUCCESS, before, group)
        group.committed = CommittedOffsets(
            request.query_id, request.checkpoint_id, change.committed, change.at
        )
        group.failures = 0
        group.last_failure = None
        group.counters.succeeded += 1
        group.counters.refreshed += int(request.refresh)
        self._retries.repaired(group.group_id)
        self._retries.reindex(group)

    def _commit_failed(self, change: CommitFailed) -> None:
        request = change.request
        group = self.groups[request.group_id]
        before, flying = index(group), group.in_flight == request
        if flying:
            group.in_flight = None
        group.counters.failed[change.reason] += 1
        group.last_failure = change.reason
        owner_unchanged = group.query_id == request.query_id
        if group.slot is None and owner_unchanged:  # R8: nothing newer, retry these
            group.slot = request.checkpoint
            group.failures = request.attempt
            group.retry_at = change.retry_at
            group.rewind_allowed = group.rewind_allowed or request.rewind
        if flying:
            moves = _FAILURE if owner_unchanged else _FAILURE_OWNER_GONE
            if moves[before] != index(group):
                event = Event.FAILURE if owner_unchanged else Event.FAILURE_OWNER_GONE
                refused(event, before, group)
        self._retries.reindex(group)

    def _released(self, change: QueryReleased) -> None:
        self.queries.pop(change.query_id, None)
        group = self.groups.get(change.group_id)
        if group is not None and group.query_id == change.query_id:
            before = index(group)
            group.query_id = None
            group.slot = None
            if _RELEASE[before] != index(group):
                refused(Event.RELEASE, before, group)
            self._retries.reindex(group)

    def _commit_interval_set(self, change: CommitIntervalSet) -> None:
        group = self.groups[change.group_id]
        group.commit_interval = change.seconds
        self._retries.reindex(group)  # its ready time moves with its interval

    def _rewind_allowed(self, change: RewindAllowed) -> None:
        self.groups[change.group_id].rewind_allowed = True


_APPLY: Mapping[type[Any], Callable[[Protocol, Any], None]] = {
    QueryRegistered: Protocol._registered,
    CheckpointAdded: Protocol._added,
    CheckpointCompleted: Protocol._completed,
    CommitStarted: Protocol._commit_started,
    CommitSucceeded: Protocol._commit_succeeded,
    CommitFailed: Protocol._commit_failed,
    QueryReleased: Protocol._released,
    RewindAllowed: Protocol._rewind_allowed,
    CommitIntervalSet: Protocol._commit_interval_set,
}
