"""Apply and inspect the Alembic migrations in ``migrations/`` from code."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

import migrations

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


# Replicas starting together migrate one at a time (PostgreSQL's DDL is transactional:
# the next one finds the schema at head).
_MIGRATION_LOCK = 0x5350_4B4F  # "SPKO"


def upgrade(engine: Engine) -> None:
    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
