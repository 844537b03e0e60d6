"""Tells the watcher child what only this process's memory knows of the groups
(``core.lag.group_memory``), so that its status and reports read as this process's would;
with replicas, also this replica's id and the groups it commits (docs/decisions.md, "A
replica's watcher reads its replica's groups").

Every ``interval`` seconds: the groups whose memory changed (ledger R15) or with a commit
in flight, and, when they changed, the folders' reports, the identity problems, the owned
groups and the outcomes of events of no known group. The watcher exports every group's
series of ``/metrics`` from what it is told. A watcher new since the last message it took
(``generation``), or one that did not take it, is told everything (``whole``).

Invariants
  - A group's memory after a change reaches the watcher with the first message it takes
    after that change; every message names this replica.
  - The message is built a few milliseconds at a time (``Turns``): a group that changes
    meanwhile is collected again (R15) and told in the next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

from spark_offset_sidecar.core.lag.figures import JobRates
from spark_offset_sidecar.core.lag.group_memory import GroupMemory, memory_of
from spark_offset_sidecar.core.lag.report import FolderReport
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.errors import WatcherUnavailable
from spark_offset_sidecar.ports.watcher import MemoryUpdate, WatcherLink
from spark_offset_sidecar.runtime.group_reports import FolderReports
from spark_offset_sidecar.turns import Turns

log = logging.getLogger(__name__)

TELL_EVERY = 1.0  # seconds: how late a watcher's counters may be behind this process's


class MemoryRelay:
    def __init__(
        self,
        ledger: Ledger,
        link: WatcherLink,
        *,
        waiting: Callable[[str], str | None],
        job: Callable[[str], JobRates | None],
        folders: FolderReports | None = None,
        problems: Callable[[], Sequence[str]] = tuple,
        owned: Callable[[], frozenset[str] | None] = lambda: None,
        replica: str | None = None,
        interval: float = TELL_EVERY,
        told: Callable[[], None] = lambda: None,
    ) -> None:
        """``owned``: with replicas, the groups this replica commits now (None: every
        group, told never); ``replica``: this replica's id (None: not replicated);
        ``told``: called after each message the watcher took."""
        self._ledger = ledger
        self._link = link
        self._waiting = waiting
        self._job = job
        self._folders = folders
        self._problems = problems
        self._sent_problems: tuple[str, ...] | None = None
        self._owned = owned
        self._replica = replica
        self._told = told
        self._sent_owned: frozenset[str] | None = None
        self.interval = interval
        self._sent_to: int | None = None  # the watcher's generation that took the last
        self._flying: set[str] = set()  # groups told with a commit in flight
        self._sent_folders: Mapping[str, tuple[FolderReport, ...]] | None = None
        self._sent_unattributed: Mapping[str, int] | None = None
        self.messages = 0  # taken by a watcher
        ledger.follow_memory()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.tell()
            except Exception:  # a bug here must not end the relay, nor the service
                log.exception("telling the watcher failed")

    async def tell(self) -> bool:
        """One message; False when the watcher did not take it."""
        ledger = self._ledger
        changed = ledger.memory_changes()
        generation = self._link.generation
        whole = generation != self._sent_to
        if whole and self._link.problem is not None:
            return False  # not ready to take the whole fleet yet (it loads the store)
        ids = list(ledger.groups) if whole else list(changed | self._flying)
        groups: dict[str, GroupMemory | None] = {}
        flying: set[str] = set()
        turns = Turns()
        for group_id in ids:
            group = ledger.groups.get(group_id)
            if group is None:
                groups[group_id] = None
            else:
                groups[group_id] = memory_of(group, self._waiting(group_id), self._job(group_id))
                if group.in_flight is not None:
                    flying.add(group_id)
            await turns.take()
        folders = dict(self._folders()) if self._folders is not None else None
        new_folders = folders if whole or folders != self._sent_folders else None
        problems = tuple(self._problems())
        new_problems = problems if whole or problems != self._sent_problems else None
        owned = self._owned()
        new_owned = owned if whole or owned != self._sent_owned else None
        unattributed = dict(ledger.unattributed)
        new_unattributed = (
            unattributed if whole or unattributed != self._sent_unattributed else None
        )
        update = MemoryUpdate(
            groups, new_folders, whole, new_problems, new_owned, self._replica, new_unattributed
        )
        if not whole and update == MemoryUpdate({}, replica=self._replica):  # nothing to tell
            return True
        try:
            await self._link.tell(update)
        except WatcherUnavailable as exc:
            if self._sent_to is not None:
                log.info("the watcher took nothing (it is told everything next): %s", exc)
            self._sent_to = None
            return False
        self._sent_to, self._flying = generation, flying
        self._sent_folders, self._sent_problems = folders, problems
        self._sent_owned, self._sent_unattributed = owned, unattributed
        self.messages += 1
        self._told()
        return True
