"""Apply and inspect the Alembic migrations from code.

They live in the checkout's ``migrations/`` folder, installed as the package
``migrations`` (pyproject.toml maps the one onto the other). Alembic is imported by the
functions that apply them or look for a newer release's: the batches' writer and the
watcher, which only check that the database is at ``HEAD``, start without it (alembic, mako
and pygments, and the migrations read: about 0.2 s of CPU a start)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

from spark_offset_sidecar import __version__
from spark_offset_sidecar.errors import SchemaFromNewerRelease

if TYPE_CHECKING:
    from alembic.config import Config


def _migrations_dir() -> Path:
    spec = importlib.util.find_spec("spark_offset_sidecar.migrations")
    if spec is None or spec.origin is None:
        raise RuntimeError("spark_offset_sidecar.migrations is not installed")
    return Path(spec.origin).resolve().parent


MIGRATIONS_DIR = _migrations_dir()


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


# Replicas starting together migrate one at a time (PostgreSQL's DDL is transactional:
# the next one finds the schema at head).
_MIGRATION_LOCK = 0x5350_4B4F  # "SPKO"


def upgrade(engine: Engine) -> None:
    from alembic import command

    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        refuse_unknown(connection)  # under the lock: what the upgrade would start from
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def refuse_unknown(connection: Connection) -> None:
    """``SchemaFromNewerRelease`` if the database is at a migration this release does not
    have (a newer release's): before anything reads or writes it. Alembic alone would fail
    on it with "Can't locate revision", naming neither release nor what to do."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    known = {revision.revision for revision in script.walk_revisions()}
    for current in MigrationContext.configure(connection).get_current_heads():
        if current not in known:
            database = connection.engine.url.render_as_string(hide_password=True)
            newest = script.get_current_head() or "none"
            raise SchemaFromNewerRelease(database, current, newest, __version__)


def check_known(engine: Engine) -> None:
    """``refuse_unknown`` on a connection of its own (read only)."""
    with engine.connect() as connection:
        refuse_unknown(connection)


# The newest migration's revision: the schema this release reads and writes, named here so
# that checking a database needs no alembic. tests/adapters/test_migrations.py holds it to
# the head of migrations/versions/.
HEAD = "0008"


def head_revision() -> str:
    return HEAD


def current_revision(engine: Engine) -> str | None:
    """The revision ``alembic_version`` holds; None for a database never migrated."""
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        found: list[str] = list(
            connection.execute(text("SELECT version_num FROM alembic_version")).scalars()
        )
        return ",".join(sorted(found)) or None
