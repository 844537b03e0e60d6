"""When a group's slot may be taken: retry timing, commit intervals, refreshes (ledger
R6, R8, R9, R12, R13), kept in heaps so that the committer's questions cost O(ready
groups x log n), not O(groups).

Rules held here
  R6 in flight   (stated in ``core.ledger.protocol``) its retry time is ``ready_at``.
  R8 backoff     A failed commit is retried after ``backoff.delay(attempt)``.
  R9 retention   Kafka drops a member-less group's offsets ``offsets.retention.minutes``
                 after its last commit. A group with nothing to commit whose last commit is
                 ``refresh_after`` old commits the same offsets again (taken like a slot).
  R12 repair     After a takeover, a group whose offsets in Kafka differ from its stored
                 committed offsets (a late commit of the old owner landed) is ``repair``ed:
                 it commits its stored offsets again at once (taken like R9), unless a
                 commit follows anyway (a slot, or one in flight). Never persisted.
  R13 interval   A group's slot is taken at most once per commit interval (its own, else
                 the ledger's ``commit_interval``; 0: every checkpoint, Flink's contract),
                 counted from when its last commit was taken; meanwhile newer completions
                 replace the slot (R5, counted skipped), so the newest offsets are always
                 the ones committed, at most one interval late. ``take(flush=True)`` (at
                 shutdown) does not wait for the interval.
  R11 replicas   A replica takes (and refreshes) only the groups it owns (``commit_only``).
A held group (R10, ``held``) is never ready.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable

from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.ledger.state import GroupState
from spark_offset_sidecar.core.ledger.watched import MemoryWatch


def checkpoints_behind(group: GroupState) -> int:
    """R13: how many completed checkpoints the group's committed offsets trail the newest
    completed one by (0 when nothing waits in the slot, or nothing was committed yet)."""
    if group.slot is None or group.committed is None:
        return 0
    if group.committed.query_id != group.slot.query_id:
        return 0
    return max(0, group.slot.checkpoint_id - group.committed.checkpoint_id)


class Retries:
    """The ready and refresh indexes of ``groups``, kept by ``reindex`` after every change
    to a group:
      _takeable      groups with a slot and no commit in flight (R6 but retry time)
      _ready_heap    (ready_at, group) of takeable groups, lazily cleaned: an entry counts
                     only while its group is takeable and ``_ready_due`` holds its time;
                     every takeable group has one entry that counts
      _refresh_heap  (due, group) for R9, lazily cleaned: an entry counts only while it
                     still equals the group's ``refresh_due``."""

    def __init__(
        self,
        groups: dict[str, GroupState],
        held: Counter[str],
        watch: MemoryWatch,
        *,
        backoff: Backoff,
        refresh_after: float | None,
        commit_interval: float,
    ) -> None:
        self.backoff = backoff
        self.refresh_after = refresh_after
        self.commit_interval = commit_interval
        self._groups = groups
        self._held = held
        self._watch = watch
        self.committing: set[str] | None = None  # R11: groups this replica commits
        self._takeable: set[str] = set()
        self._ready_heap: list[tuple[float, str]] = []
        self._ready_due: dict[str, float] = {}
        self._refresh_heap: list[tuple[float, str]] = []
        self._repairs: set[str] = set()  # R12: groups due their stored offsets again now
        for group in groups.values():
            self.reindex(group)

    def interval_of(self, group: GroupState) -> float:
        """R13: the group's commit interval (its own, else the default)."""
        return self.commit_interval if group.commit_interval is None else group.commit_interval

    def ready_at(self, group: GroupState) -> float:
        """When ``group``'s slot may be taken: after its retry time (R8) and its commit
        interval (R13)."""
        return max(group.retry_at, group.interval_from + self.interval_of(group))

    def refresh_due(self, group: GroupState) -> float | None:
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

    def commits(self, group_id: str) -> bool:
        """Whether this replica commits ``group_id`` (R11; always, for a single replica)."""
        return self.committing is None or group_id in self.committing

    def commit_only(self, group_ids: Iterable[str] | None) -> None:
        """R11: take (and refresh, R9) only ``group_ids`` from now on; None: every group."""
        before, self.committing = self.committing, None if group_ids is None else set(group_ids)
        if self.committing is not None:  # R12: a repair belongs to the takeover it followed
            self._repairs &= self.committing
        if before is None or self.committing is None:
            touched: Iterable[str] = list(self._groups)
        else:
            touched = before ^ self.committing
        for group_id in touched:
            self.update(group_id)

    def repair(self, group_id: str) -> bool:
        """R12: commit ``group_id``'s stored offsets again at once. False when nothing
        needs it: no stored offsets, not this replica's, or a commit follows anyway."""
        group = self._groups.get(group_id)
        if group is None:
            return False
        self._repairs.add(group.group_id)
        if self.refresh_due(group) is None:
            self._repairs.discard(group.group_id)
            return False
        self.reindex(group)
        return True

    def repaired(self, group_id: str) -> None:
        """R12: ``group_id`` committed (its repair, if any, is done)."""
        self._repairs.discard(group_id)

    def update(self, group_id: str) -> None:
        """Reindex ``group_id`` after its group was replaced or removed."""
        group = self._groups.get(group_id)
        if group is None:
            self._watch.mark(group_id)  # R15: a watcher forgets it too
            self.untake(group_id)
        else:
            self.reindex(group)

    def reindex(self, group: GroupState) -> None:
        # Every change to a group's memory reindexes it (or is an event, ``apply``): R15.
        self._watch.mark(group.group_id)
        if not self.commits(group.group_id):
            self.untake(group.group_id)
            return
        if group.slot is not None and group.in_flight is None:
            self._takeable.add(group.group_id)
            ready_at = self.ready_at(group)
            if self._ready_due.get(group.group_id) != ready_at:
                self._ready_due[group.group_id] = ready_at
                heapq.heappush(self._ready_heap, (ready_at, group.group_id))
                if len(self._ready_heap) > 2 * len(self._groups) + 64:  # drop stale entries
                    self._ready_heap = [e for e in set(self._ready_heap) if self._ready_valid(e)]
                    heapq.heapify(self._ready_heap)
        else:
            self.untake(group.group_id)
        due = self.refresh_due(group)
        if due is None:
            return
        heapq.heappush(self._refresh_heap, (due, group.group_id))
        if len(self._refresh_heap) > 2 * len(self._groups) + 64:  # drop stale entries
            self._refresh_heap = [e for e in set(self._refresh_heap) if self._refresh_valid(e)]
            heapq.heapify(self._refresh_heap)

    def untake(self, group_id: str) -> None:
        """``group_id`` is not takeable: its ready entry stops counting."""
        self._takeable.discard(group_id)
        self._ready_due.pop(group_id, None)

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

    def waiting_for_interval(self, now: float) -> list[str]:
        """Groups whose slot waits only for its commit interval (R13)."""
        return [
            g
            for g in self._takeable
            if g not in self._held
            and self._groups[g].retry_at <= now < self.ready_at(self._groups[g])
        ]

    def _ready_valid(self, entry: tuple[float, str]) -> bool:
        due, group_id = entry
        return group_id in self._takeable and self._ready_due.get(group_id) == due

    def _refresh_valid(self, entry: tuple[float, str]) -> bool:
        due, group_id = entry
        group = self._groups.get(group_id)
        return group is not None and self.refresh_due(group) == due
