"""``offset-sidecar backup FILE``: a copy of the SQLite database taken while another
connection writes to it (as the service does) is one consistent file, the ``-wal`` file's
committed transactions included; PostgreSQL, an existing FILE and a missing database are
refused, changing nothing."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

import pytest

from spark_offset_sidecar import cli
from spark_offset_sidecar.adapters.sql.backup import backup_sqlite
from spark_offset_sidecar.errors import StoreRefused


def service_database(path: Path) -> sqlite3.Connection:
    """A database in WAL mode that never checkpoints: what it holds stays in ``-wal``."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA wal_autocheckpoint=0")
    connection.execute("CREATE TABLE pairs (n INTEGER PRIMARY KEY, half INTEGER NOT NULL)")
    return connection


def test_a_backup_taken_while_writes_go_on_holds_whole_transactions_and_the_wal(
    tmp_path: Path,
) -> None:
    database = tmp_path / "sidecar.db"
    writing = service_database(database)
    for n in range(100):  # in the -wal file only
        writing.execute("INSERT INTO pairs VALUES (?, 0), (?, 1)", (2 * n, 2 * n + 1))
    assert (tmp_path / "sidecar.db-wal").stat().st_size > 0
    stop = threading.Event()
    written = [100]

    def write() -> None:
        """Each transaction two rows: a consistent copy never holds half of one."""
        n = 100
        while not stop.is_set():
            writing.execute("BEGIN IMMEDIATE")
            writing.execute("INSERT INTO pairs VALUES (?, 0)", (2 * n,))
            writing.execute("INSERT INTO pairs VALUES (?, 1)", (2 * n + 1,))
            writing.execute("COMMIT")
            n += 1
            written[0] = n

    writer = threading.Thread(target=write)
    writer.start()
    try:
        url = f"sqlite:///{database}"
        copies = [backup_sqlite(url, tmp_path / f"copy-{i}.db") for i in range(5)]
    finally:
        stop.set()
        writer.join()
        writing.close()
    print(f"{written[0] - 100} transactions written while 5 copies were taken")
    for made in copies:
        assert not made.target.with_name(made.target.name + "-wal").exists()
        with contextlib.closing(sqlite3.connect(made.target)) as copy:
            assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
            rows, halves = copy.execute("SELECT count(*), sum(half) FROM pairs").fetchone()
            assert halves * 2 == rows, "half a transaction copied"
            assert 200 <= rows <= 2 * written[0]
            (highest,) = copy.execute("SELECT max(n) FROM pairs").fetchone()
            assert highest == rows - 1, "a transaction missing before a copied one"


def test_the_command_says_what_it_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "sidecar.db"
    monkeypatch.setenv("SIDECAR_DATABASE_URL", f"sqlite:///{database}")
    assert cli.main(["migrate"]) == 0
    target = tmp_path / "before-upgrade.db"
    assert cli.main(["backup", str(target)]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith(f"backed up {database} to {target}: ")
    assert said.endswith("integrity ok")
    with contextlib.closing(sqlite3.connect(target)) as copy:
        tables = {name for (name,) in copy.execute("SELECT name FROM sqlite_master")}
    assert {"alembic_version", "consumer_groups", "queries"} <= tables


def test_postgresql_is_refused_naming_pg_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SIDECAR_DATABASE_URL", "postgresql+psycopg://sidecar:secret@db/sidecar")
    assert cli.main(["backup", str(tmp_path / "copy.db")]) == 1
    said = capsys.readouterr().err
    assert "back it up with pg_dump (docs/run/upgrade.md)" in said
    assert "secret" not in said
    assert not list(tmp_path.iterdir())


def test_a_missing_database_and_an_existing_file_are_refused(tmp_path: Path) -> None:
    database = tmp_path / "sidecar.db"
    with pytest.raises(StoreRefused, match="no SQLite database"):
        backup_sqlite(f"sqlite:///{database}", tmp_path / "copy.db")
    assert not list(tmp_path.iterdir())  # no empty database made, no copy
    with pytest.raises(StoreRefused, match="names none"):
        backup_sqlite("sqlite://", tmp_path / "copy.db")
    service_database(database).close()
    older = tmp_path / "older-backup.db"
    older.write_bytes(b"an older backup")
    with pytest.raises(StoreRefused, match="exists"):
        backup_sqlite(f"sqlite:///{database}", older)
    assert older.read_bytes() == b"an older backup"
