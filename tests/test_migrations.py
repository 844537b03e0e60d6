"""Alembic migrations produce exactly the schema the code uses, and ``check`` sees it."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from service import migrate
from service.db_schema import metadata
from service.errors import StoreUnavailable
from service.sql_store import SqlStore


def test_migrations_match_the_schema(database_url: str) -> None:
    store = SqlStore(database_url)
    store.migrate()
    with store.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), metadata)
    assert diff == []
    assert migrate.current_revision(store.engine) == migrate.head_revision() == "0002"
    store.check()
    store.migrate()  # idempotent
    store.close()


def test_check_fails_on_a_database_without_the_schema(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'empty.sqlite'}")
    with pytest.raises(StoreUnavailable, match="schema is at None"):
        store.check()


def test_sqlite_runs_in_wal_with_full_sync(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
