"""A lag monitor over a ledger the test changes, on a clock the test moves: what the
property tests of the monitor and of what reads it (reports, ``/metrics``) start from."""

from __future__ import annotations

from typing import Any

from spark_offset_sidecar.core.lag.status import CommitWindows
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.ports.kafka import LogEndReader
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.testing import InMemoryLogEnds

IDLE, LAGGING = TopicPartition("idle", 0), TopicPartition("lagging", 0)


def monitor_of(fleet: Ledger, reader: LogEndReader, clock: list[float], **kw: Any) -> LagMonitor:
    """A monitor of ``fleet`` at ``clock[0]``: reads every 10 s, ERR after 3 failures,
    status windows of 4 commits, STOP after 60 s."""
    return LagMonitor(
        lambda: fleet,
        reader,
        interval=10,
        err_after_failures=3,
        windows=CommitWindows(4, stop_after=60),
        clock=lambda: clock[0],
        **kw,
    )


def idle_and_lagging() -> tuple[Ledger, InMemoryLogEnds]:
    """Two groups committed at offset 5: "idle" on ``IDLE``, whose log ends there (caught
    up), and "lagging" on ``LAGGING``, whose log ends at 9."""
    fleet = Ledger(
        groups=[
            GroupState("idle", "q1", committed=CommittedOffsets("q1", 1, {IDLE: 5}, 1.0)),
            GroupState("lagging", "q2", committed=CommittedOffsets("q2", 1, {LAGGING: 5}, 1.0)),
        ]
    )
    return fleet, InMemoryLogEnds({IDLE: 5, LAGGING: 9})
