"""The lag monitor: every ``interval`` it reads the log ends of every committed partition,
samples the groups' commits into their status windows, and evaluates every group's status
(``core.group_status``). The metrics and ``GET /v1/status`` read what it keeps.

Invariants
  - A failed read keeps the last known log ends (their age is exported) and never stops
    the loop; a topic that cannot be read leaves its partitions unknown, not zero.
  - Statuses are as of the last read (``evaluated_at``); nothing here touches the ledger.
  - Evaluating yields to the event loop every ``SLICE`` groups: at 10,000 groups of 32
    partitions a full evaluation costs seconds of CPU (bench/README.md), and requests must
    not wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from spark_offset_sidecar.core.group_status import CommitWindows, GroupStatus
from spark_offset_sidecar.core.ledger import Ledger
from spark_offset_sidecar.core.ledger_state import GroupState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import KafkaReadError
from spark_offset_sidecar.ports.kafka import LogEndReader

log = logging.getLogger(__name__)
SLICE = 100  # groups evaluated between two yields to the event loop


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
        self.windows.observe(groups, self.log_ends, now)
        statuses: dict[str, GroupStatus] = {}
        for start in range(0, len(groups), SLICE):
            for group in groups[start : start + SLICE]:
                statuses[group.group_id] = self.status_of(group, now)
            await asyncio.sleep(0)
        self.statuses = statuses
        self.evaluated_at = now

    def status_of(self, group: GroupState, now: float) -> GroupStatus:
        """The group's status at ``now``, on the last known log ends."""
        return self.windows.evaluate(group, self.log_ends, now, err_after=self.err_after_failures)
