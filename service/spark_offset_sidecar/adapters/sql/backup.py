"""A backup of the SQLite database taken while the service writes to it: SQLite's online
backup API (``sqlite3.Connection.backup``), in one step, so that it copies one read
transaction's snapshot (the ``-wal`` file's committed transactions included) and the
service's writes go on meanwhile (WAL: a reader blocks no writer). The copy is one file,
in rollback-journal mode (no ``-wal`` beside it), checked with ``PRAGMA integrity_check``.
PostgreSQL is refused: ``pg_dump`` backs it up (docs/run/upgrade.md)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from spark_offset_sidecar.errors import StoreRefused

BUSY_SECONDS = 30  # how long a step waits for the service's write lock to be let go


@dataclass(frozen=True)
class Backup:
    source: Path
    target: Path
    pages: int
    page_size: int


def backup_sqlite(url: str, target: Path) -> Backup:
    """Copy the SQLite database of ``url`` (``SIDECAR_DATABASE_URL``) into the new file
    ``target``; refuses any other database, a database file that does not exist and a
    ``target`` that does."""
    parsed = make_url(url)
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() != "sqlite":
        raise StoreRefused(
            f"backup copies a SQLite database; {shown} is {parsed.get_backend_name()}: "
            "back it up with pg_dump (docs/run/upgrade.md)"
        )
    name = parsed.database
    if not name or name == ":memory:" or parsed.query.get("uri") == "true":
        raise StoreRefused(f"backup copies a SQLite database file; {shown} names none")
    source = Path(name).resolve()
    if not source.is_file():
        raise StoreRefused(f"no SQLite database at {source} (SIDECAR_DATABASE_URL={shown})")
    if target.exists():
        raise StoreRefused(f"{target} exists: name a new file, an older backup is kept")
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        pages, page_size = _copy(source, partial)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    return Backup(source, target, pages, page_size)


def _copy(source: Path, partial: Path) -> tuple[int, int]:
    """The copy, checked; its pages and page size."""
    # mode=rw: never makes an empty database where the service's is missing.
    with (
        contextlib.closing(
            sqlite3.connect(f"{source.as_uri()}?mode=rw", uri=True, timeout=BUSY_SECONDS)
        ) as reading,
        contextlib.closing(sqlite3.connect(partial)) as copy,
    ):
        reading.backup(copy)  # every page in one step: one snapshot
        copy.execute("PRAGMA journal_mode=DELETE")  # one file, whatever the source's
        (checked,) = copy.execute("PRAGMA integrity_check").fetchone()
        if checked != "ok":
            raise StoreRefused(f"the copy of {source} fails its integrity check: {checked}")
        (pages,) = copy.execute("PRAGMA page_count").fetchone()
        (page_size,) = copy.execute("PRAGMA page_size").fetchone()
    return int(pages), int(page_size)
