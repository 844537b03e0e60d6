"""What the watcher was told of the groups by the process taking events
(``runtime.memory_relay``), kept and handed to the watcher's ledger.

Invariants
  - Every group of the ledger that was told of holds the last memory told
    (``core.lag.group_memory.remember``): when told, and when the store follower reads
    it again (``refreshed``).
  - ``groups`` holds each group's memory as last told, with replicas the groups its
    teller does not commit too: a snapshot, replaced when told anew and never changed in
    place (``observe.fleet_metrics`` exports every group's series of it, and keeps them
    while the snapshot is the same).
  - A group told gone is forgotten and keeps no commit in flight.
  - A whole message replaces everything told before; none but a whole one comes first.
  - With replicas, the ledger commits (evaluates, exports, publishes) the groups last told
    its teller's, published as that replica (``publish_as``); with ``follows_owned``,
    ``wanted`` is those groups (the store follower holds only them).
  - A wanted group told of that the ledger does not hold yet calls ``unknown`` (the store
    is read now); groups newly told its replica's call ``watch_more`` once held (the lag
    monitor reads now), so they show within a read, not an interval later.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from spark_offset_sidecar.core.lag.figures import JobRates
from spark_offset_sidecar.core.lag.group_memory import GroupMemory, remember
from spark_offset_sidecar.core.lag.report import FolderReport
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.ports.watcher import MemoryUpdate


class WatcherMemory:
    def __init__(
        self,
        ledger: Ledger,
        note_job: Callable[[str, JobRates], None],
        unknown: Callable[[], None] = lambda: None,
        watch_more: Callable[[], None] = lambda: None,
        publish_as: Callable[[str], None] = lambda _replica: None,
        *,
        follows_owned: bool = False,
    ) -> None:
        """``unknown``: told of a group the ledger does not hold yet; ``watch_more``: told
        that its replica took groups (the lag monitor reads their log ends now);
        ``publish_as``: told which replica it watches for."""
        self._ledger = ledger
        self._note_job = note_job
        self._unknown = unknown
        self._watch_more = watch_more
        self._publish_as = publish_as
        self._owned: frozenset[str] = frozenset()  # with replicas: as last told
        self._teller: str | None = None  # with replicas: the replica last told of
        self._follows_owned = follows_owned
        self._unread: set[str] = set()  # taken, not in the ledger yet: read, then watched
        self.groups: dict[str, GroupMemory] = {}
        self.folders: Mapping[str, tuple[FolderReport, ...]] = {}
        self.problems: tuple[str, ...] = ()  # the service's identity problems
        self.unattributed: Mapping[str, int] = {}  # its events' outcomes of no known group
        self.messages = 0

    def takes(self, update: MemoryUpdate) -> bool:
        """Whether ``update`` can be taken: a whole message first (one that tells only what
        changed since a message this watcher never took would leave groups untold)."""
        return update.whole or self.messages > 0

    def take(self, update: MemoryUpdate) -> None:
        assert self.takes(update), "a partial message before a whole one"
        groups = self._ledger.groups
        gone = [g for g, memory in update.groups.items() if memory is None]
        if update.whole:  # every group the teller holds: one told before and not now is gone
            gone.extend(self.groups.keys() - update.groups.keys())
        self._forget(gone)
        if any(
            m is not None and g not in groups and self._wants(g) for g, m in update.groups.items()
        ):
            self._unknown()
        for group_id, memory in update.groups.items():
            if memory is None:
                continue
            self.groups[group_id] = memory
            if (group := groups.get(group_id)) is not None:
                remember(group, memory)
            if memory.job is not None:
                self._note_job(group_id, memory.job)
        if update.folders is not None:
            self.folders = update.folders
        if update.problems is not None:
            self.problems = update.problems
        if update.unattributed is not None:
            self.unattributed = update.unattributed
        self._own(update)
        self.messages += 1

    def _own(self, update: MemoryUpdate) -> None:
        """A replica's groups: evaluated and published here as it; the new ones read now."""
        if update.replica is not None and update.replica != self._teller:
            self._teller = update.replica
            self._publish_as(update.replica)
        if (owned := update.owned) is None:
            return
        self._ledger.commit_only(owned)
        taken, lost, self._owned = owned - self._owned, self._owned - owned, owned
        if self._follows_owned:  # let go at the follower's next step (not held in flight)
            for group_id in lost:
                if (group := self._ledger.groups.get(group_id)) is not None:
                    group.in_flight = None
        unread = {g for g in taken if g not in self._ledger.groups}
        self._unread = (self._unread & owned) | unread
        if unread:
            self._unknown()  # read from the store now; watched once read (``refreshed``)
        if len(unread) < len(taken):
            self._watch_more()

    def _wants(self, group_id: str) -> bool:
        return not self._follows_owned or group_id in self._owned

    def wanted(self) -> frozenset[str] | None:
        """The groups the store follower holds (None: every group)."""
        return self._owned if self._follows_owned else None

    def _forget(self, group_ids: Collection[str]) -> None:
        """Groups the teller no longer holds: nothing told of them, nothing in flight."""
        groups = self._ledger.groups
        for group_id in group_ids:
            self.groups.pop(group_id, None)
            if (group := groups.get(group_id)) is not None:
                group.in_flight = None

    def refreshed(self, group_ids: Collection[str]) -> None:
        groups = self._ledger.groups
        for group_id in group_ids:
            memory, group = self.groups.get(group_id), groups.get(group_id)
            if memory is not None and group is not None:
                remember(group, memory)
        if self._unread and (read := {g for g in self._unread if g in groups}):
            self._unread -= read
            self._watch_more()

    def waiting(self, group_id: str) -> str | None:
        memory = self.groups.get(group_id)
        return memory.waiting if memory is not None else None

    def folder_reports(self) -> Mapping[str, tuple[FolderReport, ...]]:
        return self.folders
