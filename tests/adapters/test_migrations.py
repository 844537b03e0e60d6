"""Alembic migrations produce exactly the schema the code uses, and ``check`` sees it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from spark_offset_sidecar import __version__
from spark_offset_sidecar.adapters.sql import migrate
from spark_offset_sidecar.adapters.sql.schema import GROUP_ROWS_FILLFACTOR, metadata
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.errors import SchemaFromNewerRelease, StoreUnavailable
from tests.support.databases import NEWER_REVISION, contents, migrated_by_a_newer_release


def test_migrations_match_the_schema(database_url: str) -> None:
    store = SqlStore(database_url)
    store.migrate()
    with store.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), metadata)
        alembic_reads = MigrationContext.configure(connection).get_current_revision()
    assert diff == []
    # HEAD, which checks compare with alembic unloaded, is the newest of migrations/versions/
    newest = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
    assert migrate.current_revision(store.engine) == alembic_reads == migrate.HEAD == newest
    store.check()
    store.migrate()  # idempotent
    store.close()


def test_a_database_a_newer_release_migrated_is_refused_and_left_as_it_was(
    database_url: str,
) -> None:
    """What a downgrade must refuse: this release's migration (what serve runs as it starts)
    stops at a revision it does not know, says which, its own newest and what to do, and
    changes nothing (Alembic alone: "Can't locate revision", naming neither)."""
    migrated_by_a_newer_release(database_url)
    before = contents(database_url)
    store = SqlStore(database_url)
    try:
        for attempt in (store.migrate, store.refuse_newer_schema):
            with pytest.raises(SchemaFromNewerRelease) as refused:
                attempt()
            said = str(refused.value)
            assert f"is at migration {NEWER_REVISION}, which release {__version__}" in said
            assert f"its newest migration is {migrate.head_revision()}" in said
            assert "Run that newer release" in said
            assert "restore the backup taken before the upgrade" in said
        with pytest.raises(StoreUnavailable, match=f"at {NEWER_REVISION}, not at {migrate.HEAD}"):
            store.check()  # a watcher's start and /readyz, with alembic unloaded
    finally:
        store.close()
    assert contents(database_url) == before
    assert before["alembic_version"]["rows"] == [repr((NEWER_REVISION,))]


def test_check_fails_on_a_database_without_the_schema(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'empty.sqlite'}")
    with pytest.raises(StoreUnavailable, match="schema is at None"):
        store.check()


def test_sqlite_runs_in_wal_with_full_sync(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


def test_replicas_starting_together_migrate_one_at_a_time(postgres_server: Any) -> None:
    postgres_server.reset()
    stores = [SqlStore(postgres_server.url) for _ in range(3)]
    pool = ThreadPoolExecutor(3)
    try:
        migrations = [pool.submit(store.migrate) for store in stores]
        for migration in migrations:  # two at once would collide, or wait on each other
            migration.result(timeout=120)
        for store in stores:
            store.check()
    finally:
        pool.shutdown(wait=False)
        for store in stores:
            store.close()


def test_group_rows_leave_room_for_their_next_version_on_postgresql(postgres_server: Any) -> None:
    postgres_server.reset()
    store = SqlStore(postgres_server.url)
    fillfactor = text("SELECT reloptions FROM pg_class WHERE relname = 'consumer_groups'")
    try:
        store.migrate()
        with store.engine.connect() as connection:
            assert connection.scalar(fillfactor) == [f"fillfactor={GROUP_ROWS_FILLFACTOR}"]
        config = migrate.alembic_config()
        with store.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0006")
        with store.engine.connect() as connection:
            assert connection.scalar(fillfactor) is None
    finally:
        store.close()
