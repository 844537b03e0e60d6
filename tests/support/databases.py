"""Databases as an upgrade leaves them, for the tests of the window (``adapters.sql.migrate``):
one the next release migrated (served), one a release two ahead migrated (refused), and
everything a database holds, to compare before and after."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import create_engine, inspect, text

from spark_offset_sidecar.adapters.sql import migrate
from spark_offset_sidecar.adapters.sql.schema import consumer_groups
from spark_offset_sidecar.adapters.sql.store import SqlStore

# Migrations no release of this tree has (``adapters.sql.migrate``, the window): the next
# release's, whose schema still serves this one (its marker: this release's head), and one
# of a release two ahead, whose schema serves the next release on (its marker: the next
# release's head, which this release does not know).
NEXT_REVISION = "0098_from_the_next_release"
NEWER_REVISION = "0099_from_a_newer_release"


def migrated_by_a_newer_release(url: str) -> None:
    """This release's schema with a group stored in it, then what the migrations of a
    release two ahead would do (``as_a_newer_release_would``)."""
    with_a_group(url)
    as_a_newer_release_would(url)


def with_a_group(url: str) -> None:
    """This release's schema, with a group committed at checkpoint 7."""
    store = SqlStore(url)
    try:
        store.migrate()
    finally:
        store.close()
    a_group_in(url)


def a_group_in(url: str) -> None:
    """A group committed at checkpoint 7, in a database any release migrated."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(
                consumer_groups.insert().values(
                    group_id="kept",
                    rewind_allowed=False,
                    committed_checkpoint_id=7,
                    committed_offsets=json.dumps({"orders": {"0": 42}}),
                )
            )
    finally:
        engine.dispose()


def as_the_next_release_would(url: str) -> None:
    """The next release's migration on this release's schema: a column of its own, its
    revision in its version table, the marker left at this release's head."""
    _migrate_as(url, "next_column", NEXT_REVISION, migrate.HEAD)


def as_a_newer_release_would(url: str) -> None:
    """The next release's migration, then one of the release after it (its marker at the
    next release's head)."""
    as_the_next_release_would(url)
    _migrate_as(url, "newer_column", NEWER_REVISION, NEXT_REVISION)


def _migrate_as(url: str, column: str, revision: str, serves: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text(f"ALTER TABLE consumer_groups ADD COLUMN {column} TEXT"))
            for table, value in ((migrate.VERSION_TABLE, revision), (migrate.MARKER_TABLE, serves)):
                connection.execute(text(f"UPDATE {table} SET version_num = '{value}'"))
    finally:
        engine.dispose()


def contents(url: str) -> dict[str, Any]:
    """Every table's columns, indexes and rows (the version tables among them)."""
    engine = create_engine(url)
    try:
        found: dict[str, Any] = {}
        inspector = inspect(engine)
        with engine.connect() as connection:
            for table in sorted(inspector.get_table_names()):
                columns = [
                    (c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)
                ]
                indexes = sorted(str(i["name"]) for i in inspector.get_indexes(table))
                rows = sorted(
                    repr(tuple(r)) for r in connection.execute(text(f'SELECT * FROM "{table}"'))
                )
                found[table] = {"columns": columns, "indexes": indexes, "rows": rows}
        return found
    finally:
        engine.dispose()
