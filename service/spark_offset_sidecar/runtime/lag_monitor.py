"""The lag monitor: every ``interval`` it reads the log ends of every committed partition,
samples the groups' commits into their status windows, and evaluates every group's status
(``core.group_status``). The metrics and ``GET /v1/status`` read what it keeps.

Invariants
  - A failed read keeps the last known log ends (their age is exported) and never stops
    the loop; a topic that cannot be read leaves its partitions unknown, not zero.
  - Statuses are as of the last read (``evaluated_at``); nothing here touches the ledger.
  - Only groups whose status can have changed are sampled and evaluated again: those
    whose ``status_inputs`` (commit, query, failures, log ends) changed since the last
    evaluation, and those with a lagging partition (their status depends on the time).
    The others keep their status (``core.group_status.timeless``).
  - Evaluating yields to the event loop every ``SLICE`` groups: at 10,000 groups of 32
    partitions a full evaluation costs seconds of CPU (bench/README.md), and requests must
    not wait for it.
  - With replicas (a ``board``): a group this replica starts to commit has its window
    seeded from the board (the previous owner's) before it is sampled here, and after
    each evaluation the reports and windows of this replica's groups are published, those
    that changed since they were last published (a failed publication is retried at the
    next evaluation). A board that cannot be read leaves the new windows empty.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from spark_offset_sidecar.core.group_report import (
    FolderReport,
    GroupReport,
    LiveCommits,
    report_of,
)
from spark_offset_sidecar.core.group_status import (
    CommitWindows,
    GroupStatus,
    StatusInputs,
    StoredWindow,
    status_inputs,
    timeless,
)
from spark_offset_sidecar.core.ledger import Ledger
from spark_offset_sidecar.core.ledger_state import GroupState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import KafkaReadError, StoreError
from spark_offset_sidecar.ports.kafka import LogEndReader
from spark_offset_sidecar.ports.status_board import BoardEntry, StatusBoard

log = logging.getLogger(__name__)
SLICE = 100  # groups evaluated between two yields to the event loop
# A published report without its times: what, unchanged, need not be written again.
_Content = tuple[GroupStatus, LiveCommits, int, tuple[FolderReport, ...], StoredWindow]


@dataclass
class LagReadCounters:
    succeeded: int = 0
    failed: int = 0


@dataclass
class LagMonitor:
    ledger: Callable[[], Ledger]
    reader: LogEndReader
    interval: float
    err_after_failures: int
    windows: CommitWindows = field(default_factory=CommitWindows)
    clock: Callable[[], float] = time.time
    log_ends: dict[TopicPartition, int] = field(default_factory=dict)
    read_at: float | None = None  # when the log ends were last read successfully
    evaluated_at: float | None = None
    statuses: dict[str, GroupStatus] = field(default_factory=dict)
    counters: LagReadCounters = field(default_factory=LagReadCounters)
    evaluations: int = 0  # groups evaluated in all (the others kept their status)
    _inputs: dict[str, StatusInputs] = field(default_factory=dict)  # as last evaluated
    board: StatusBoard | None = None  # with replicas: where reports are published
    # By group, how reading its followed folders goes here (published with its report).
    folders: Callable[[], Mapping[str, tuple[FolderReport, ...]]] = dict
    # What was last published per group (all but the times): unchanged ones are not
    # written again.
    _published: dict[str, _Content] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception:  # a bug here must not end the monitor, nor the service
                log.exception("the lag monitor's read failed")
            await asyncio.sleep(self.interval)

    async def poll(self) -> None:
        ledger = self.ledger()
        wanted = {
            tp
            for group in ledger.groups.values()
            if group.committed is not None and ledger.commits(group.group_id)
            for tp in group.committed.offsets
        }
        try:
            answer = await self.reader.log_ends(wanted)
        except KafkaReadError as exc:
            self.counters.failed += 1
            log.warning("reading log-end offsets failed (keeping the last known): %s", exc)
        else:
            self.counters.succeeded += 1
            if answer.failed_topics:
                log.warning(
                    "log-end offsets of %s could not be read", ", ".join(answer.failed_topics)
                )
            self.log_ends = answer.ends
            self.read_at = self.clock()
        await self.evaluate(ledger)

    async def evaluate(self, ledger: Ledger) -> None:
        now = self.clock()
        groups = [g for g in ledger.groups.values() if ledger.commits(g.group_id)]
        if self.board is not None:
            await self.seed_windows([g.group_id for g in groups])
        inputs: dict[str, StatusInputs] = {}
        statuses: dict[str, GroupStatus] = {}
        changed: list[GroupState] = []
        for group in groups:
            group_id = group.group_id
            inputs[group_id] = now_inputs = status_inputs(group, self.log_ends)
            kept = self.statuses.get(group_id)
            if kept is not None and self._inputs.get(group_id) == now_inputs and timeless(kept):
                statuses[group_id] = kept
            else:
                changed.append(group)
        self.windows.observe(changed, self.log_ends, now, present=inputs)
        for start in range(0, len(changed), SLICE):
            for group in changed[start : start + SLICE]:
                statuses[group.group_id] = self.status_of(group, now)
            await asyncio.sleep(0)
        self.evaluations += len(changed)
        self._inputs = inputs
        self.statuses = statuses
        self.evaluated_at = now
        if self.board is not None:
            await self.publish(ledger, now)

    async def seed_windows(self, group_ids: list[str]) -> None:
        """Start the windows of groups new here from the board (their last owner's)."""
        assert self.board is not None
        new = [g for g in group_ids if not self.windows.knows(g)]
        if not new:
            return
        try:
            stored = await asyncio.to_thread(self.board.windows, new)
        except StoreError as exc:
            log.warning("could not read the status windows of %d new groups: %s", len(new), exc)
            return
        for group_id, window in stored.items():
            self.windows.seed(group_id, window)

    async def publish(self, ledger: Ledger, now: float) -> None:
        """Put the reports of this replica's groups that changed on the board."""
        assert self.board is not None
        entries: list[BoardEntry] = []
        contents: dict[str, _Content] = {}
        folders = self.folders()
        for group_id, status in self.statuses.items():
            group = ledger.groups.get(group_id)
            if group is None:
                continue
            report = self.report(status, group, ledger, now, folders.get(group_id, ()))
            entry = BoardEntry(report, self.windows.window_of(group_id))
            content = (report.status, report.live, report.pending, report.folders, entry.window)
            if self._published.get(group_id) != content:
                entries.append(entry)
                contents[group_id] = content
        for gone in self._published.keys() - self.statuses.keys():
            del self._published[gone]
        if not entries:
            return
        try:
            await asyncio.to_thread(self.board.publish, entries)
        except StoreError as exc:
            log.warning("could not publish %d group reports: %s", len(entries), exc)
            return
        self._published.update(contents)

    def report(
        self,
        status: GroupStatus,
        group: GroupState,
        ledger: Ledger,
        now: float,
        folders: tuple[FolderReport, ...] = (),
    ) -> GroupReport:
        """``status`` with what the ledger's memory holds of the group's commits."""
        query = ledger.queries.get(group.query_id) if group.query_id else None
        pending = len(query.pending) if query is not None else 0
        replica = self.board.replica_id if self.board is not None else None
        return report_of(status, group, pending, now, self.read_at, replica, folders)

    def status_of(self, group: GroupState, now: float) -> GroupStatus:
        """The group's status at ``now``, on the last known log ends."""
        return self.windows.evaluate(group, self.log_ends, now, err_after=self.err_after_failures)
