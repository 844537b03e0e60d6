"""What ``create_app`` is built from besides the settings, each part complete: the Kafka
clients, the ledger's database, the metrics, the clock, and whether the watcher and the
writer run as child processes (what ``offset-sidecar serve`` runs). ``production``:
aiokafka's clients on the SQL database; tests hand in ``testing.MemoryKafka`` on the SQL
database (``on_sql``) or ``testing.MemoryDatabase``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from spark_offset_sidecar.app.database import SqlDatabase
from spark_offset_sidecar.app.kafka_commits import CommittingClients
from spark_offset_sidecar.app.shared import new_metrics
from spark_offset_sidecar.observe.metrics import HeapView, SidecarMetrics
from spark_offset_sidecar.ports.database import Database
from spark_offset_sidecar.ports.kafka import KafkaCommitting
from spark_offset_sidecar.settings import Settings


@dataclass(frozen=True)
class Parts:
    kafka: KafkaCommitting
    database: Database
    metrics: SidecarMetrics
    clock: Callable[[], float] = time.time
    # The watcher and the writer as child processes (``Topology.resolve``): what serve runs.
    children: bool = False


def on_sql(
    settings: Settings,
    kafka: KafkaCommitting,
    *,
    children: bool = False,
    clock: Callable[[], float] = time.time,
) -> Parts:
    """``kafka`` on the SQL database of ``settings``."""
    metrics = new_metrics(settings)
    return Parts(kafka, SqlDatabase(settings, metrics), metrics, clock, children)


def production(settings: Settings, *, children: bool = True, heap: HeapView | None = None) -> Parts:
    """What serve runs: aiokafka's clients on the SQL database, the process's heap keeper's
    pauses exported."""
    parts = on_sql(settings, CommittingClients(settings), children=children)
    if heap is not None:
        parts.metrics.watch_heap(heap)
    return parts
