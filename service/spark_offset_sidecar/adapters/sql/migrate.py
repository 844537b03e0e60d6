"""Apply and inspect the Alembic migrations (``migrations/``, installed as
``spark_offset_sidecar.migrations``). Only ``upgrade`` imports Alembic: the writer and
the watcher, which only check the database (``unready``), start without it (0.2 s of CPU)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    inspect,
    text,
)

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
    """Migrate the database to ``HEAD``; nothing to do on one a newer release within the
    window migrated (its schema serves this release)."""
    from alembic import command

    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        at = refuse_unknown(connection)  # under the lock: what the upgrade would start from
        if at.revision in _KNOWN:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")


def refuse_unknown(connection: Connection) -> Revisions:
    """The database's revisions; ``SchemaFromNewerRelease`` if a newer release's schema no
    longer serves this one (its marker is none of ``REVISIONS``): before anything reads or
    writes it. Alembic alone would fail with "Can't locate revision", naming neither
    release nor what to do."""
    at = revisions(connection)
    if at.revision in _KNOWN or at.serves in REVISIONS:
        return at
    database = connection.engine.url.render_as_string(hide_password=True)
    raise SchemaFromNewerRelease(database, str(at.revision), HEAD, __version__)


# Every migration's revision, oldest first: the schemas this release knows, named here so
# that checking a database needs no alembic. tests/adapters/test_migrations.py holds them to
# migrations/versions/.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009")
HEAD = REVISIONS[-1]  # the schema this release reads and writes
_KNOWN: tuple[str | None, ...] = (None, *REVISIONS)  # not among them: a newer release's

# The expand/contract window (docs/decisions.md, "Migrations serve the release before"):
# this tree's revision in VERSION_TABLE, the marker (the newest migration's ``serves``) in
# MARKER_TABLE, where 0.2.0 and older read their own revision.
VERSION_TABLE = "sidecar_schema_version"
MARKER_TABLE = "alembic_version"


@dataclass(frozen=True)
class Revisions:
    """A database's newest applied migration (None: never migrated) and its marker."""

    revision: str | None
    serves: str | None


def revisions(connection: Connection) -> Revisions:
    """The revisions a database holds; a database no release from 0.3.0 migrated has no
    ``VERSION_TABLE``: its marker is its revision."""
    serves = _read(connection, MARKER_TABLE)
    return Revisions(_read(connection, VERSION_TABLE) or serves, serves)


def unready(connection: Connection) -> str | None:
    """Why this release cannot read and write the database now; None if it can: at
    ``HEAD``, or at a newer release's revision whose marker it knows."""
    at = revisions(connection)
    if at.revision == HEAD or (at.revision not in _KNOWN and at.serves in REVISIONS):
        return None
    if at.revision in _KNOWN:
        return f"database schema is at {at.revision}, not at {HEAD}"
    return (
        f"database schema is at {at.revision}, which serves releases from migration "
        f"{at.serves} on, not this one (at {HEAD})"
    )


def bootstrap(connection: Connection) -> None:
    """Give a database migrated by 0.2.0 or older a ``VERSION_TABLE``, at the revision its
    marker table holds (then Alembic goes on from there)."""
    tables = inspect(connection)
    if not tables.has_table(MARKER_TABLE) or tables.has_table(VERSION_TABLE):
        return
    table = _version_table(VERSION_TABLE)
    table.create(connection)
    for revision in _all(connection, MARKER_TABLE):
        connection.execute(table.insert().values(version_num=revision))


def mark(connection: Connection, serves: str | None) -> None:
    """Set the marker (``serves``: None for a database migrated down to nothing); a start
    that migrated nothing writes nothing (a read-only database still starts)."""
    if _read(connection, MARKER_TABLE) == serves:
        return
    table = _version_table(MARKER_TABLE)
    table.create(connection, checkfirst=True)
    connection.execute(table.delete())
    if serves is not None:
        connection.execute(table.insert().values(version_num=serves))


def _version_table(name: str) -> Table:
    """A version table as Alembic makes it."""
    return Table(
        name,
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name=f"{name}_pkc"),
    )


def _all(connection: Connection, table: str) -> list[str]:
    if not inspect(connection).has_table(table):
        return []
    return list(connection.execute(text(f"SELECT version_num FROM {table}")).scalars())


def _read(connection: Connection, table: str) -> str | None:
    return ",".join(sorted(_all(connection, table))) or None
