"""Databases as an upgrade leaves them, for the tests of what a release refuses: one a newer
release has migrated, and everything a database holds, to compare before and after."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import create_engine, inspect, text

from spark_offset_sidecar.adapters.sql.schema import consumer_groups
from spark_offset_sidecar.adapters.sql.store import SqlStore

# A migration no release of this tree has: what a newer release would have written.
NEWER_REVISION = "0099_from_a_newer_release"


def migrated_by_a_newer_release(url: str) -> None:
    """This release's schema with a group stored in it, then what a newer release's
    migration would do (``as_a_newer_release_would``)."""
    with_a_group(url)
    as_a_newer_release_would(url)


def with_a_group(url: str) -> None:
    """This release's schema, with a group committed at checkpoint 7."""
    store = SqlStore(url)
    try:
        store.migrate()
        with store.engine.begin() as connection:
            connection.execute(
                consumer_groups.insert().values(
                    group_id="kept",
                    rewind_allowed=False,
                    committed_checkpoint_id=7,
                    committed_offsets=json.dumps({"orders": {"0": 42}}),
                )
            )
    finally:
        store.close()


def as_a_newer_release_would(url: str) -> None:
    """A column of the newer release's own, and its revision in ``alembic_version``."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("ALTER TABLE consumer_groups ADD COLUMN newer_column TEXT"))
            connection.execute(text(f"UPDATE alembic_version SET version_num = '{NEWER_REVISION}'"))
    finally:
        engine.dispose()


def contents(url: str) -> dict[str, Any]:
    """Every table's columns, indexes and rows (``alembic_version`` among them)."""
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
