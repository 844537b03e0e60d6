"""The watcher's lag monitors on each Kafka cluster's readers (``app.watch``), and tasks
in the background of a lifespan, which the process taking events (``app.start``) starts
too. The side taking events (committers, the ledger's writes, routes of events) is none of
it: the watcher imports this, not ``app.start``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AsyncExitStack
from typing import Any

from prometheus_client import CollectorRegistry

from spark_offset_sidecar.core.lag.report import FolderReport
from spark_offset_sidecar.core.lag.status import CommitWindows
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.kafka import KafkaReading
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.runtime.lag_monitors import LagMonitors
from spark_offset_sidecar.settings import Settings


def watch_lag(
    stack: AsyncExitStack,
    settings: Settings,
    kafka: KafkaReading,
    metrics: SidecarMetrics,
    ledger: Callable[[], Ledger],
    *,
    clock: Callable[[], float],
    board: StatusBoard | None,
    waits: Callable[[str], str | None],
    folders: Callable[[], Mapping[str, tuple[FolderReport, ...]]],
    exported: CollectorRegistry,
) -> LagMonitor | LagMonitors:
    """One lag monitor per cluster (a topic of one name on two clusters is two topics), on
    its log-end and record-time readers; ``waits``: what a group's commit in flight waits
    for; ``folders``: how reading each group's followed folders goes (published with its
    report); ``exported``: the watcher's share of its service's ``/metrics``, where its
    reads are exported, as on its own ``/metrics``."""
    status, readers, times = settings.status, kafka.log_ends(), kafka.record_times()
    for reader in readers.values():
        stack.push_async_callback(reader.close)
    for time_reader in times.values():
        stack.push_async_callback(time_reader.close)
    metrics.watch_resent(kafka.resent())
    monitors = {
        key: LagMonitor(
            ledger,
            reader,
            interval=status.lag_read_interval_seconds,
            err_after_failures=status.status_err_after_failures,
            windows=CommitWindows(status.status_window, status.status_stop_after_seconds),
            clock=clock,
            board=board,
            record_times=times.get(key),
            risk_seconds=status.retention_risk_seconds,
            waits=waits,
            one_cluster=len(readers) > 1,
            cluster=key,
            folders=folders,
        )
        for key, reader in readers.items()
    }
    metrics.watch_lag(monitors, also=exported)
    return LagMonitors(monitors) if len(monitors) > 1 else monitors[None]


def run_in_background(
    stack: AsyncExitStack, work: Coroutine[Any, Any, None], name: str
) -> asyncio.Task[None]:
    """``work`` as a task, cancelled (and awaited) when ``stack`` closes."""
    task = asyncio.create_task(work, name=name)
    stack.push_async_callback(cancel, task)
    return task


async def cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
