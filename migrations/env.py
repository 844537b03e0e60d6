"""Alembic environment: migrate the connection the service hands in, or the database of
SIDECAR_DATABASE_URL when run as ``alembic -c migrations/alembic.ini upgrade head``.

This tree's revision is in ``migrate.VERSION_TABLE`` (made from ``alembic_version`` on a
database 0.2.0 or older migrated); ``alembic_version`` holds the marker older releases
read, set here after each run (``adapters.sql.migrate``, the window)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from spark_offset_sidecar.adapters.sql import migrate
from spark_offset_sidecar.adapters.sql.schema import metadata
from spark_offset_sidecar.settings import Settings


def _run(connection: Connection) -> None:
    migrate.bootstrap(connection)
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=migrate.VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
        current = context.get_context().get_current_revision()
        migration = context.script.get_revision(current) if current else None
        migrate.mark(
            connection, getattr(migration.module, "serves", current) if migration else None
        )


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = create_engine(Settings.from_env().database.url)
    with engine.begin() as own_connection:
        _run(own_connection)
