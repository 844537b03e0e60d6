"""What ``create_app`` is built from besides the settings, each part complete: the Kafka
clients, the ledger's database, the metrics, how its watcher is made from its brief, and
the clock. ``production``: aiokafka's clients on the SQL database, the watcher a child
process (what ``offset-sidecar serve`` runs); tests hand in ``testing.MemoryKafka`` on the
SQL database (``on_sql``) or ``testing.MemoryDatabase``, and the watcher's own app in
their event loop (``tests.support.watcher``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from spark_offset_sidecar.adapters.child_process import child_command
from spark_offset_sidecar.adapters.watcher.child import WatcherChild
from spark_offset_sidecar.app.database import SqlDatabase
from spark_offset_sidecar.app.kafka_commits import CommittingClients
from spark_offset_sidecar.app.shared import new_metrics
from spark_offset_sidecar.app.watcher_brief import WatcherBrief
from spark_offset_sidecar.observe.metrics import HeapView, SidecarMetrics
from spark_offset_sidecar.ports.database import Database
from spark_offset_sidecar.ports.kafka import KafkaCommitting
from spark_offset_sidecar.ports.watcher import Watcher
from spark_offset_sidecar.settings import Settings

MakeWatcher = Callable[[WatcherBrief], Watcher]


@dataclass(frozen=True)
class Parts:
    kafka: KafkaCommitting
    database: Database
    metrics: SidecarMetrics
    watcher: MakeWatcher  # the service's watcher, from its brief (not started)
    clock: Callable[[], float] = time.time


def watcher_child(settings: Settings) -> MakeWatcher:
    """The watcher as a child process, logging as ``settings`` say."""
    command = child_command("watcher", settings.log.level, settings.log.format)
    return lambda brief: WatcherChild(command, brief.encode())


def on_sql(
    settings: Settings,
    kafka: KafkaCommitting,
    watcher: MakeWatcher,
    *,
    clock: Callable[[], float] = time.time,
) -> Parts:
    """``kafka`` on the SQL database of ``settings``."""
    metrics = new_metrics(settings)
    return Parts(kafka, SqlDatabase(settings, metrics), metrics, watcher, clock)


def production(settings: Settings, *, heap: HeapView | None = None) -> Parts:
    """What serve runs: aiokafka's clients on the SQL database, the watcher a child
    process, the process's heap keeper's pauses exported."""
    parts = on_sql(settings, CommittingClients(settings), watcher_child(settings))
    if heap is not None:
        parts.metrics.watch_heap(heap)
    return parts
