"""Alembic migrations produce exactly the schema the code uses, and ``check`` sees it; the
window (``adapters.sql.migrate``): this release serves on the next release's schema, is
refused on one two releases ahead, and the previous release serves on this one's."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from harness.releases import BuiltRelease
from spark_offset_sidecar import __version__
from spark_offset_sidecar.adapters.sql import migrate
from spark_offset_sidecar.adapters.sql.schema import (
    GROUP_ROWS_FILLFACTOR,
    consumer_groups,
    metadata,
)
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.errors import SchemaFromNewerRelease, StoreUnavailable
from tests.support.databases import (
    NEWER_REVISION,
    NEXT_REVISION,
    as_the_next_release_would,
    contents,
    migrated_by_a_newer_release,
    with_a_group,
)


def test_migrations_match_the_schema(database_url: str) -> None:
    store = SqlStore(database_url)
    store.migrate()
    with store.engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "version_table": migrate.VERSION_TABLE,
                "include_name": lambda name, kind, _parent: name != migrate.MARKER_TABLE,
            },
        )
        diff = compare_metadata(context, metadata)
        alembic_reads = context.get_current_revision()
        at = migrate.revisions(connection)
    assert diff == []
    # REVISIONS, which checks compare with alembic unloaded, are those of migrations/versions/
    script = ScriptDirectory.from_config(migrate.alembic_config())
    known = tuple(reversed([revision.revision for revision in script.walk_revisions()]))
    assert known == migrate.REVISIONS
    assert at.revision == alembic_reads == migrate.HEAD == script.get_current_head()
    assert at.serves == "0008"  # 0009 drops columns 0.2.0 never names: it serves 0.2.0
    store.check()
    store.migrate()  # idempotent
    store.close()


def test_this_release_serves_a_database_the_next_release_migrated(database_url: str) -> None:
    """The window: the next release's migration leaves the marker at this release's head,
    so this release is ready on it, starts (its migration does nothing) and reads it."""
    with_a_group(database_url)
    as_the_next_release_would(database_url)
    before = contents(database_url)
    store = SqlStore(database_url)
    try:
        store.refuse_newer_schema()
        store.migrate()
        store.check()
        assert [group.group_id for group in store.load().groups] == ["kept"]
    finally:
        store.close()
    assert contents(database_url) == before


def test_a_database_a_release_two_ahead_migrated_is_refused_and_left_as_it_was(
    database_url: str,
) -> None:
    """What a downgrade past the window must refuse: this release's migration (what serve
    runs as it starts) stops on a database whose marker it does not know, says which
    migration, its own newest and what to do, and changes nothing (Alembic alone: "Can't
    locate revision", naming neither)."""
    migrated_by_a_newer_release(database_url)
    before = contents(database_url)
    store = SqlStore(database_url)
    try:
        for attempt in (store.migrate, store.refuse_newer_schema):
            with pytest.raises(SchemaFromNewerRelease) as refused:
                attempt()
            said = str(refused.value)
            assert f"is at migration {NEWER_REVISION}, which release {__version__}" in said
            assert f"its newest migration is {migrate.HEAD}" in said
            assert "Run that newer release" in said
            assert "restore the backup taken before the upgrade" in said
        unready = f"at {NEWER_REVISION}, which serves releases from migration {NEXT_REVISION}"
        with pytest.raises(StoreUnavailable, match=unready):
            store.check()  # a watcher's start and /readyz, with alembic unloaded
    finally:
        store.close()
    assert contents(database_url) == before
    assert before[migrate.VERSION_TABLE]["rows"] == [repr((NEWER_REVISION,))]
    assert before[migrate.MARKER_TABLE]["rows"] == [repr((NEXT_REVISION,))]


def test_a_database_the_previous_release_migrated_is_taken_over_and_still_serves_it(
    database_url: str, tmp_path: Path, previous_release: BuiltRelease
) -> None:
    """The previous release's database (its ``migrate``, then a group stored) gets this
    release's version table at the previous release's revision and is migrated on from
    there; then the previous release starts on it again and is ready (its ``migrate`` runs
    its readiness check), changing nothing: the rollback within the window."""
    previous = _offset_sidecar_migrate(previous_release.python, database_url, tmp_path)
    assert previous.returncode == 0, previous.stderr[-3000:]
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            assert not inspect(connection).has_table(migrate.VERSION_TABLE)
            assert migrate.revisions(connection) == migrate.Revisions("0008", "0008")
            connection.execute(consumer_groups.insert().values(group_id="kept"))
    finally:
        engine.dispose()
    store = SqlStore(database_url)
    try:
        store.migrate()
        store.check()
        assert [group.group_id for group in store.load().groups] == ["kept"]
    finally:
        store.close()
    migrated = contents(database_url)
    assert migrated[migrate.VERSION_TABLE]["rows"] == [repr((migrate.HEAD,))]
    assert migrated[migrate.MARKER_TABLE]["rows"] == [repr(("0008",))]
    assert [c[0] for c in migrated["replicas"]["columns"]] == [
        "replica_id",
        "started_at",
        "expires_at",
    ]
    again = _offset_sidecar_migrate(previous_release.python, database_url, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.strip() == "database at the newest migration (0008)"
    assert contents(database_url) == migrated


def _offset_sidecar_migrate(
    python: Path | str, url: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``offset-sidecar migrate`` of the release ``python`` has, on the database ``url``."""
    return subprocess.run(
        [str(python), "-m", "spark_offset_sidecar.cli", "migrate"],
        cwd=cwd,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("SIDECAR_")},
            "SIDECAR_DATABASE_URL": url,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


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
