"""Fixtures of the adapter tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from spark_offset_sidecar.adapters.sql.shared_store import SharedSqlStore
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.core.ledger.changes import QueryRegistered
from tests.support.lease_clock import LeaseClock


@pytest.fixture
def store(database_url: str) -> Iterator[SqlStore]:
    """A migrated store on ``database_url``: a SQLite file, then a real PostgreSQL."""
    sql = SqlStore(database_url)
    sql.migrate()
    yield sql
    sql.close()


@pytest.fixture
def stores(postgres_server: Any) -> Iterator[tuple[SharedSqlStore, SharedSqlStore]]:
    """Two replicas' stores, "a" and "b", on one empty PostgreSQL database holding queries
    q0-q3 of groups g0-g3 (registered through "b")."""
    postgres_server.reset()
    a = SharedSqlStore(postgres_server.url, "a")
    b = SharedSqlStore(postgres_server.url, "b")
    a.migrate()
    b.persist([QueryRegistered(f"q{i}", f"g{i}", 0.0) for i in range(4)])
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def lease_clock() -> LeaseClock:
    return LeaseClock()
