"""The app as serve runs it, in the test's process (FastAPI's TestClient): settings on a
SQLite file of the test's own, its parts with Kafka's doubles, its writer a child process,
its watcher its own app in the test's event loop (``tests.support.watcher``), and posting
a Spark progress."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.app.parts import Parts, on_sql
from spark_offset_sidecar.app.shared import new_metrics
from spark_offset_sidecar.app.watch import open_database
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.store import LedgerStore
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.testing import MemoryDatabase, MemoryKafka
from tests.support.service import spark_progress
from tests.support.watcher import loop_watcher, with_board


def settings_for(tmp_path: Path, **values: Any) -> Settings:
    """The settings a service reads from its environment, on a SQLite file in ``tmp_path``:
    each keyword is the variable ``SIDECAR_<KEYWORD>`` (``lag_read_interval_seconds=0.05``,
    ``cluster_eu_kafka_bootstrap_servers="eu:9092"``), its value as the environment gives it."""
    environ = {"SIDECAR_DATABASE_URL": f"sqlite:///{tmp_path / 'sidecar.db'}"}
    environ.update({f"SIDECAR_{name.upper()}": _text(value) for name, value in values.items()})
    return Settings.from_env(environ)


def doubles(
    settings: Settings,
    kafka: MemoryKafka | None = None,
    *,
    store: LedgerStore | None = None,
    board: StatusBoard | None = None,
    clock: Callable[[], float] = time.time,
) -> Parts:
    """Kafka's doubles (``kafka``, or new ones) on the SQL database of ``settings``, or on
    the store double ``store``; its watcher's reports published on and read from ``board``
    when given. The watcher follows the SQL database of ``settings`` (with ``store``:
    migrated here, and empty)."""
    kafka = kafka or MemoryKafka()
    watcher = loop_watcher(kafka, clock, open_database if board is None else with_board(board))
    if store is not None:
        migrate(settings.database.url)
        return Parts(kafka, MemoryDatabase(store), new_metrics(settings), watcher, clock)
    return on_sql(settings, kafka, watcher, clock=clock)


def migrate(url: str) -> None:
    """The SQL database at ``url`` migrated, as the service migrates it at start."""
    sql = SqlStore(url)
    try:
        sql.migrate()
    finally:
        sql.close()


def _text(value: Any) -> str:
    """``value`` as the environment writes it: ``True`` as ``true``, a tuple with commas."""
    if isinstance(value, bool):
        return str(value).lower()
    return ",".join(value) if isinstance(value, tuple) else str(value)


def post_progress(client: TestClient, batch: int, offsets: dict[str, dict[str, int]], **kw: Any):  # type: ignore[no-untyped-def]
    group = kw.pop("group", "orders-app")
    return client.post(
        "/v1/progress", json={"group_id": group, "progress": spark_progress(batch, offsets, **kw)}
    )
