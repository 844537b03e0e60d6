"""What the process taking events (``app.start``) and its watcher (``app.watch``) both
start: the lag monitors on each Kafka cluster's readers, and tasks in the background of a
lifespan. The side taking events (committers, the ledger's writes, routes of events) is
none of it: the watcher imports this, not ``app.start``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from spark_offset_sidecar.app.kafka_clients import KafkaClients, Key
from spark_offset_sidecar.app.parts import Parts
from spark_offset_sidecar.core.lag.status import CommitWindows
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.kafka import LogEndReader, RecordTimeReader
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.runtime.lag_monitors import LagMonitors
from spark_offset_sidecar.runtime.own_loop import RecordTimesOnOwnLoop
from spark_offset_sidecar.settings import Settings


class Resends(Protocol):
    """A Kafka client that sends again after the broker closed a connection under it."""

    @property
    def resent(self) -> int: ...


@dataclass(frozen=True)
class Watched:
    """What a lag monitor is built from, in the process taking events or in a watcher."""

    settings: Settings
    kafka: KafkaClients
    metrics: SidecarMetrics
    clock: Callable[[], float]


def watch_lag(
    stack: AsyncExitStack,
    watched: Watched,
    ledger: Callable[[], Ledger],
    *,
    given: Parts,
    board: StatusBoard | None = None,
    waits: Callable[[str], str | None] | None = None,
    committers: Mapping[Key, Resends] | None = None,
    reads_exported: bool = True,
    reads_also: CollectorRegistry | None = None,
) -> LagMonitor | LagMonitors:
    """One lag monitor per cluster (a topic of one name on two clusters is two topics), on
    the log-end and record-time readers built here or the ones given (one cluster);
    ``waits``: what a group's commit in flight waits for (None: no commits here);
    ``reads_exported``: its reads on ``/metrics`` (not where a watcher reads the log ends),
    and in ``reads_also`` too (a watcher's share of its service's ``/metrics``)."""
    status, metrics = watched.settings.status, watched.metrics
    built = watched.kafka.log_ends() if given.log_ends is None else {}
    readers: dict[Key, LogEndReader] = (
        {None: given.log_ends} if given.log_ends is not None else dict(built)
    )
    times: dict[Key, RecordTimeReader] = {}
    if given.record_times is not None:
        times[None] = given.record_times
    elif status.read_record_times and given.log_ends is None:
        times = {  # aiokafka parses the fetched records off the events' loop
            key: RecordTimesOnOwnLoop(reader, f"record times {key or 'default'}")
            for key, reader in watched.kafka.record_times().items()
        }
    for reader in readers.values():
        stack.push_async_callback(reader.close)
    for time_reader in times.values():
        stack.push_async_callback(time_reader.close)
    resending: dict[Key, list[Resends]] = {}
    for key, commits in (committers or {}).items():
        resending.setdefault(key, []).append(commits)
    for key, reads in built.items():
        resending.setdefault(key, []).append(reads)
    metrics.watch_resent({key: partial(resent, c) for key, c in resending.items()})
    monitors = {
        key: LagMonitor(
            ledger,
            reader,
            interval=status.lag_read_interval_seconds,
            err_after_failures=status.status_err_after_failures,
            windows=CommitWindows(status.status_window, status.status_stop_after_seconds),
            clock=watched.clock,
            board=board,
            record_times=times.get(key),
            risk_seconds=status.retention_risk_seconds,
            waits=waits or no_commits,
            one_cluster=len(readers) > 1,
            cluster=key,
        )
        for key, reader in readers.items()
    }
    if reads_exported:
        metrics.watch_lag(monitors, also=reads_also)
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


def resent(clients: list[Resends]) -> int:
    return sum(client.resent for client in clients)


def no_commits(_group_id: str) -> None:
    """What a commit in flight waits for where none is made (a watcher)."""
