"""Alembic environment: migrate the connection the service hands in, or the database of
SIDECAR_DATABASE_URL when run as ``alembic -c migrations/alembic.ini upgrade head``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from spark_offset_sidecar.adapters.sql.schema import metadata
from spark_offset_sidecar.settings import Settings


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = create_engine(Settings.from_env().database_url)
    with engine.begin() as own_connection:
        _run(own_connection)
