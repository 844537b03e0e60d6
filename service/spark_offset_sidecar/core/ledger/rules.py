"""The offset ledger: Flink's commit-on-checkpoint protocol for Spark queries.

Pure: standard library only, no asyncio, HTTP, database or Kafka; time comes in as ``now``
(seconds). Every ``decide_*`` method only reads state and returns a ``Decision`` whose
changes the caller makes durable before ``apply`` mutates the ledger (see ``changes``).

Per query: pending checkpoints in id order, the last completed id, the one group it owns.
Per group: the owning query, the *slot* (newest completed offsets not yet committed, like
Flink's ``AtomicReference``), the commit *in flight*, the committed offsets, counters.

Rules
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
  R9 retention   Kafka drops a member-less group's offsets ``offsets.retention.minutes``
                 after its last commit. A group with nothing to commit whose last commit is
                 ``refresh_after`` old commits the same offsets again (taken like a slot).
  R10 durability Changes are applied before they are durable only under a savepoint: until
                 it is kept (written) or rolled back (the write failed; the ledger is
                 as if the decision never happened), its group is *held* and not taken, so
                 no commit ever carries offsets that a failed write took back.
  R11 replicas   With several replicas on one database, stored rows are the truth for what
                 events decided: ``refresh`` replaces memory's queries and groups with them
                 before deciding on them and when another replica changed them; what is
                 this replica's own (commit in flight, retry timing, counters) stays
                 (``core.ledger.merge``). A replica takes only the groups it owns
                 (``commit_only``).
  R13 interval   A group's slot is taken at most once per commit interval (its own, else
                 the ledger's ``commit_interval``; 0: every checkpoint, Flink's contract),
                 counted from when its last commit was taken; meanwhile newer completions
                 replace the slot (R5, counted skipped), so the newest offsets are always
                 the ones committed, at most one interval late. ``take(flush=True)`` (at
                 shutdown) does not wait for the interval.
  R14 cluster    A group commits to one Kafka cluster, fixed when it is first registered
                 (None: the service's default cluster). An event whose job names another
                 cluster for it is CONFLICT; one that names none takes the group's.
  R12 repair     After a takeover, a group whose offsets in Kafka differ from its stored
                 committed offsets (a late commit of the old owner landed) is ``repair``ed:
                 it commits its stored offsets again at once (taken like R9), unless a
                 commit follows anyway (a slot, or one in flight). Never persisted.
  R15 memory     When followed (``memory_changed`` not None), every group whose memory
                 (counters, commit in flight, failures, retry time) may have changed is
                 added to ``memory_changed`` until its reader empties it: what a watcher
                 is sent (``core.lag.group_memory``). Not followed: nothing is collected.

A group's commit phase follows from (slot, in flight); the only transitions are:

  phase \\ event   complete        take        success   failure
  IDLE            READY           -           -         -
  READY           READY (skip)    IN_FLIGHT   -         -
  IN_FLIGHT       IN_FLIGHT_NEXT  -           IDLE      READY (after backoff)
  IN_FLIGHT_NEXT  IN_FLIGHT_NEXT  -           READY     READY (failed one dropped)
                  (skip)
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_offset_sidecar.core.backoff import Backoff
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
from spark_offset_sidecar.core.ledger.merge import merge_group
from spark_offset_sidecar.core.ledger.state import (
    CommittedOffsets,
    GroupCounters,
    GroupPhase,
    GroupState,
    QueryState,
    counter_copy,
)
from spark_offset_sidecar.core.offsets import OffsetMap, TopicPartition, describe

DEFAULT_MAX_PENDING = 100  # Flink's FlinkKafkaConsumerBase.MAX_NUM_PENDING_CHECKPOINTS


def _cluster(name: str | None) -> str:
    return "the default Kafka cluster" if name is None else f"Kafka cluster {name!r}"


def _nothing(outcome: Outcome, detail: str, **where: Any) -> Decision:
    return Decision(outcome, detail, **where)


def unknown_query(query_id: str, **where: Any) -> Decision:
    """The answer about a query that is not known. The HTTP layer gives the same answer
    for a query the caller may not see, so that the two cannot be told apart."""
    return _nothing(
        Outcome.UNKNOWN_QUERY, f"no query {query_id} is known", query_id=query_id, **where
    )


def checkpoints_behind(group: GroupState) -> int:
    """R13: how many completed checkpoints the group's committed offsets trail the newest
    completed one by (0 when nothing waits in the slot, or nothing was committed yet)."""
    if group.slot is None or group.committed is None:
        return 0
    if group.committed.query_id != group.slot.query_id:
        return 0
    return max(0, group.slot.checkpoint_id - group.committed.checkpoint_id)


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
        # Indexes kept by ``_reindex`` after every change to a group:
        #   _takeable      groups with a slot and no commit in flight (R6 but retry time)
        #   _ready_heap    (ready_at, group) of takeable groups, lazily cleaned: an entry
        #                  counts only while its group is takeable and ``_ready_due`` holds
        #                  its time; every takeable group has one entry that counts
        #   _refresh_heap  (due, group) for R9, lazily cleaned: an entry counts only while
        #                  it still equals the group's ``_refresh_due``.
        # So the committer's questions cost O(ready groups x log n), not O(groups).
        self._takeable: set[str] = set()
        self._ready_heap: list[tuple[float, str]] = []
        self._ready_due: dict[str, float] = {}
        self._refresh_heap: list[tuple[float, str]] = []
        self._committing: set[str] | None = None  # R11: groups this replica commits
        self._repairs: set[str] = set()  # R12: groups due their stored offsets again now
        self.memory_changed: set[str] | None = None  # R15: None until followed

        for group in self.groups.values():
            self._reindex(group)

    # --- decisions on events ------------------------------------------------------------

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
        where: dict[str, Any] = {
            "query_id": query_id,
            "group_id": group_id,
            "checkpoint_id": checkpoint_id,
        }
        query = self.queries.get(query_id)
        pending = query.pending if query else {}
        checkpoint = Checkpoint(query_id, group_id, checkpoint_id, run_id, dict(offsets), now)
        existing = pending.get(checkpoint_id)
        if existing is not None:
            if existing.offsets == checkpoint.offsets:
                return _nothing(
                    Outcome.DUPLICATE, f"checkpoint {checkpoint_id} is already pending", **where
                )
            if existing.run_id == run_id:
                return _nothing(
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
        where: dict[str, Any] = {
            "query_id": query_id,
            "group_id": query.group_id,
            "checkpoint_id": checkpoint_id,
        }
        stale = self._stale(query_id, checkpoint_id, where)
        if stale is not None:
            return stale
        checkpoint = query.pending.get(checkpoint_id)
        if checkpoint is None:
            return _nothing(
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
            return _nothing(Outcome.UNKNOWN_QUERY, f"no group {group_id} is known")
        said = "the default" if seconds is None else f"{seconds:g} s"
        return Decision(
            Outcome.ACCEPTED,
            f"group {group_id} commits at most once per {said}",
            group_id=group_id,
            changes=(CommitIntervalSet(group_id, seconds),),
        )

    def decide_allow_rewind(self, group_id: str) -> Decision:
        if group_id not in self.groups:
            return _nothing(Outcome.UNKNOWN_QUERY, f"no group {group_id} is known")
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
        where: dict[str, Any] = {
            "query_id": query_id,
            "group_id": group_id,
            "checkpoint_id": checkpoint_id,
        }
        if not offsets:
            return _nothing(Outcome.IGNORED, "no Kafka offsets in it", **where)
        claimed = self._claim(query_id, group_id, now, cluster)
        if isinstance(claimed, Decision):
            return claimed
        return self._stale(query_id, checkpoint_id, where) or claimed

    def _claim(
        self, query_id: str, group_id: str, now: float, cluster: ClusterOf
    ) -> Decision | tuple[Change, ...]:
        """R1, R14: the registration to add, or the CONFLICT that refuses the event."""
        where: dict[str, Any] = {"query_id": query_id, "group_id": group_id}
        query = self.queries.get(query_id)
        if query is not None and query.group_id != group_id:
            return _nothing(
                Outcome.CONFLICT,
                f"query {query_id} commits to group {query.group_id!r}, not {group_id!r}; "
                "release the query first to move it",
                **where,
            )
        group = self.groups.get(group_id)
        if group is not None and group.query_id not in (None, query_id):
            return _nothing(
                Outcome.CONFLICT,
                f"group {group_id!r} belongs to query {group.query_id}; two queries on one "
                "group would overwrite each other's offsets",
                **where,
            )
        if group is not None and cluster.named and group.cluster != cluster.name:
            return _nothing(
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
            return _nothing(Outcome.DUPLICATE, f"checkpoint {last} was already completed", **where)
        return _nothing(
            Outcome.STALE,
            f"checkpoint {checkpoint_id} is older than completed checkpoint {last}",
            **where,
        )

    # --- decisions of the committer -----------------------------------------------------

    def ready_groups(self, now: float, limit: int | None = None) -> list[str]:
        """Groups whose slot may be taken now (R6, R13), soonest due first, then idle
        groups due a refresh (R9); never a held group (R10). At most ``limit`` slots
        (refreshes are not limited). Costs O((ready groups + held) x log groups)."""
        due_now: list[tuple[float, str]] = []
        ready: list[str] = []
        while self._ready_heap and self._ready_heap[0][0] <= now:
            if limit is not None and len(ready) >= limit:
                break
            entry = heapq.heappop(self._ready_heap)
            if not self._ready_valid(entry) or (due_now and due_now[-1] == entry):
                continue  # stale, or a twin of the entry just kept (one is enough)
            due_now.append(entry)  # still due until taken
            if entry[1] not in self._held:
                ready.append(entry[1])
        for entry in due_now:
            heapq.heappush(self._ready_heap, entry)
        return ready + self._refreshes_due(now, exclude=set(ready))

    def _refreshes_due(self, now: float, exclude: set[str]) -> list[str]:
        due_now: list[tuple[float, str]] = []
        while self._refresh_heap and self._refresh_heap[0][0] <= now:
            entry = heapq.heappop(self._refresh_heap)
            if self._refresh_valid(entry):
                due_now.append(entry)
        for entry in due_now:  # still due until taken
            heapq.heappush(self._refresh_heap, entry)
        return sorted({g for _, g in due_now if g not in self._held and g not in exclude})

    def next_retry_at(self) -> float | None:
        """The earliest time a group not held becomes ready (None: no such group); a time
        already past when a ready group was not taken."""
        held: list[tuple[float, str]] = []
        waiting: list[float] = []
        while self._ready_heap:
            entry = self._ready_heap[0]
            if not self._ready_valid(entry):
                heapq.heappop(self._ready_heap)
            elif entry[1] in self._held:  # R10: not before its savepoint is kept
                held.append(heapq.heappop(self._ready_heap))
            else:
                waiting.append(entry[0])
                break
        for entry in held:
            heapq.heappush(self._ready_heap, entry)
        while self._refresh_heap and not self._refresh_valid(self._refresh_heap[0]):
            heapq.heappop(self._refresh_heap)
        if self._refresh_heap:
            waiting.append(self._refresh_heap[0][0])
        return min(waiting, default=None)

    def _ready_valid(self, entry: tuple[float, str]) -> bool:
        due, group_id = entry
        return group_id in self._takeable and self._ready_due.get(group_id) == due

    def interval_of(self, group: GroupState) -> float:
        """R13: the group's commit interval (its own, else the default)."""
        return self.commit_interval if group.commit_interval is None else group.commit_interval

    def ready_at(self, group: GroupState) -> float:
        """When ``group``'s slot may be taken: after its retry time (R8) and its commit
        interval (R13)."""
        return max(group.retry_at, group.interval_from + self.interval_of(group))

    def _refresh_valid(self, entry: tuple[float, str]) -> bool:
        due, group_id = entry
        group = self.groups.get(group_id)
        return group is not None and self._refresh_due(group) == due

    def commit_only(self, group_ids: Iterable[str] | None) -> None:
        """R11: take (and refresh, R9) only ``group_ids`` from now on; None: every group."""
        before, self._committing = self._committing, None if group_ids is None else set(group_ids)
        if self._committing is not None:  # R12: a repair belongs to the takeover it followed
            self._repairs &= self._committing
        if before is None or self._committing is None:
            touched: Iterable[str] = list(self.groups)
        else:
            touched = before ^ self._committing
        for group_id in touched:
            if group_id in self.groups:
                self._reindex(self.groups[group_id])
            else:
                self._untake(group_id)

    @property
    def committing(self) -> frozenset[str] | None:
        """R11: the groups this replica commits (None: every group)."""
        return None if self._committing is None else frozenset(self._committing)

    def commits(self, group_id: str) -> bool:
        """Whether this replica commits ``group_id`` (R11; always, for a single replica)."""
        return self._committing is None or group_id in self._committing

    def follow_memory(self) -> None:
        """R15: collect from now on the groups whose memory changes."""
        if self.memory_changed is None:
            self.memory_changed = set()

    def memory_changes(self) -> set[str]:
        """R15: the groups whose memory may have changed since the last call (emptied);
        none while not followed (and it stays not followed)."""
        changed = self.memory_changed
        if changed is None:
            return set()
        self.memory_changed = set()
        return changed

    def _reindex(self, group: GroupState) -> None:
        # Every change to a group's memory reindexes it (or is an event, ``apply``): R15.
        if self.memory_changed is not None:
            self.memory_changed.add(group.group_id)
        if not self.commits(group.group_id):
            self._untake(group.group_id)
            return
        if group.slot is not None and group.in_flight is None:
            self._takeable.add(group.group_id)
            ready_at = self.ready_at(group)
            if self._ready_due.get(group.group_id) != ready_at:
                self._ready_due[group.group_id] = ready_at
                heapq.heappush(self._ready_heap, (ready_at, group.group_id))
                if len(self._ready_heap) > 2 * len(self.groups) + 64:  # drop stale entries
                    self._ready_heap = [e for e in set(self._ready_heap) if self._ready_valid(e)]
                    heapq.heapify(self._ready_heap)
        else:
            self._untake(group.group_id)
        due = self._refresh_due(group)
        if due is None:
            return
        heapq.heappush(self._refresh_heap, (due, group.group_id))
        if len(self._refresh_heap) > 2 * len(self.groups) + 64:  # drop stale entries
            self._refresh_heap = [e for e in set(self._refresh_heap) if self._refresh_valid(e)]
            heapq.heapify(self._refresh_heap)

    def _untake(self, group_id: str) -> None:
        """``group_id`` is not takeable: its ready entry stops counting."""
        self._takeable.discard(group_id)
        self._ready_due.pop(group_id, None)

    def _refresh_due(self, group: GroupState) -> float | None:
        """When ``group`` commits its last offsets again (R9, or at once for R12): only an
        owned group with committed offsets and nothing else to commit."""
        if (
            group.committed is None
            or group.slot is not None
            or group.in_flight is not None
            or group.query_id is None
            or not self.commits(group.group_id)
        ):
            return None
        if group.group_id in self._repairs:
            return group.committed.at  # already past: due at once
        if self.refresh_after is None:
            return None
        return group.committed.at + self.refresh_after

    def repair(self, group_id: str) -> bool:
        """R12: commit ``group_id``'s stored offsets again at once. False when nothing
        needs it: no stored offsets, not this replica's, or a commit follows anyway."""
        group = self.groups.get(group_id)
        if group is None:
            return False
        self._repairs.add(group_id)
        if self._refresh_due(group) is None:
            self._repairs.discard(group_id)
            return False
        self._reindex(group)
        return True

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
            or (not flush and now < self.ready_at(group))
            or group_id in self._held
            or not self.commits(group_id)
        ):
            return None
        slot, refresh = group.slot, False
        if slot is None:
            due = self._refresh_due(group)
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

    def waiting_for_interval(self, now: float) -> list[str]:
        """Groups whose slot waits only for its commit interval (R13): what a shutdown
        flushes (``take(flush=True)``)."""
        return [
            g
            for g in self._takeable
            if g not in self._held
            and self.groups[g].retry_at <= now < self.ready_at(self.groups[g])
        ]

    def commit_result(
        self, request: CommitRequest, now: float, failure: str | None = None
    ) -> CommitSucceeded | CommitFailed:
        """R8: the change to record; ``failure`` is None for success, else a short reason."""
        if failure is None:
            previous = self.groups[request.group_id].committed
            committed = dict(previous.offsets) if previous is not None else {}
            committed.update(request.offsets)
            return CommitSucceeded(request, now, committed)
        return CommitFailed(request, failure, now, now + self.backoff.delay(request.attempt))

    def refresh(
        self,
        query_ids: Iterable[str],
        group_ids: Iterable[str],
        queries: Iterable[QueryState],
        groups: Iterable[GroupState],
    ) -> None:
        """R11: the store's rows for ``query_ids`` and ``group_ids`` (those not among
        ``queries`` / ``groups`` are not stored). Only between batches: no savepoint open."""
        stored_queries = {q.query_id: q for q in queries}
        for query_id in query_ids:
            if query_id in stored_queries:
                self.queries[query_id] = stored_queries[query_id]
            else:
                self.queries.pop(query_id, None)
        stored_groups = {g.group_id: g for g in groups}
        for group_id in group_ids:
            stored, mine = stored_groups.get(group_id), self.groups.get(group_id)
            if stored is not None:
                self.groups[group_id] = merge_group(mine, stored)
                self._reindex(self.groups[group_id])
            elif mine is not None and mine.in_flight is None:
                del self.groups[group_id]
                self._untake(group_id)

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
                self._untake(savepoint.group_id)
            else:
                self.groups[savepoint.group_id] = savepoint.group
                self._reindex(savepoint.group)
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
        for change in decision.changes:
            self.apply_change(change)
        group = self.groups.get(decision.group_id or "")
        if group is not None:
            group.counters.events[decision.outcome.value] += 1
            if self.memory_changed is not None:
                self.memory_changed.add(group.group_id)
        else:
            self.unattributed[decision.outcome.value] += 1

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
        self._reindex(group)

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
        if group.slot is not None:
            group.counters.skipped += 1  # Flink: "Skipping commit of previous offsets"
        group.slot = checkpoint
        group.failures = 0
        group.retry_at = 0.0
        self._reindex(group)

    def _commit_started(self, change: CommitStarted) -> None:
        group = self.groups[change.request.group_id]
        group.in_flight = change.request
        group.slot = None
        group.rewind_allowed = False
        group.counters.held_back += len(change.request.held_back)
        self._reindex(group)

    def _commit_succeeded(self, change: CommitSucceeded) -> None:
        request = change.request
        group = self.groups[request.group_id]
        if group.in_flight == request:
            group.in_flight = None
        group.committed = CommittedOffsets(
            request.query_id, request.checkpoint_id, change.committed, change.at
        )
        group.failures = 0
        group.last_failure = None
        group.counters.succeeded += 1
        group.counters.refreshed += int(request.refresh)
        self._repairs.discard(group.group_id)
        self._reindex(group)

    def _commit_failed(self, change: CommitFailed) -> None:
        request = change.request
        group = self.groups[request.group_id]
        if group.in_flight == request:
            group.in_flight = None
        group.counters.failed[change.reason] += 1
        group.last_failure = change.reason
        owner_unchanged = group.query_id == request.query_id
        if group.slot is None and owner_unchanged:  # R8: nothing newer, retry these
            group.slot = request.checkpoint
            group.failures = request.attempt
            group.retry_at = change.retry_at
            group.rewind_allowed = group.rewind_allowed or request.rewind
        self._reindex(group)

    def _released(self, change: QueryReleased) -> None:
        self.queries.pop(change.query_id, None)
        group = self.groups.get(change.group_id)
        if group is not None and group.query_id == change.query_id:
            group.query_id = None
            group.slot = None
            self._reindex(group)

    def _commit_interval_set(self, change: CommitIntervalSet) -> None:
        group = self.groups[change.group_id]
        group.commit_interval = change.seconds
        self._reindex(group)  # its ready time moves with its interval

    def _rewind_allowed(self, change: RewindAllowed) -> None:
        self.groups[change.group_id].rewind_allowed = True


_APPLY: Mapping[type[Any], Callable[[Ledger, Any], None]] = {
    QueryRegistered: Ledger._registered,
    CheckpointAdded: Ledger._added,
    CheckpointCompleted: Ledger._completed,
    CommitStarted: Ledger._commit_started,
    CommitSucceeded: Ledger._commit_succeeded,
    CommitFailed: Ledger._commit_failed,
    QueryReleased: Ledger._released,
    RewindAllowed: Ledger._rewind_allowed,
    CommitIntervalSet: Ledger._commit_interval_set,
}

__all__ = [
    "CommittedOffsets",
    "GroupCounters",
    "GroupPhase",
    "GroupState",
    "Ledger",
    "QueryState",
    "Savepoint",
]
