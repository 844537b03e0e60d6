"""``LedgerStore`` on SQLAlchemy 2: SQLite (a file, WAL) by default, PostgreSQL by URL.

Each ``persist`` is one transaction. SQLite runs with ``synchronous=FULL`` in WAL mode so
that a committed transaction survives power loss, not only a killed process: a 2xx
answer means the event is on disk.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping, create_engine, event, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError

from spark_offset_sidecar.adapters.sql import migrate
from spark_offset_sidecar.adapters.sql.schema import consumer_groups, pending_checkpoints, queries
from spark_offset_sidecar.adapters.sql.writes import WRITTEN, write_changes
from spark_offset_sidecar.core.changes import (
    Change,
    Checkpoint,
)
from spark_offset_sidecar.core.ledger import CommittedOffsets, GroupState, QueryState
from spark_offset_sidecar.core.offsets import from_json
from spark_offset_sidecar.errors import StoreError, StoreRefused, StoreUnavailable
from spark_offset_sidecar.ports.store import StoredState

log = logging.getLogger(__name__)


def create_store_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        uri = parsed.query.get("uri") == "true"  # then the database is a file: URI, not a path
        if parsed.database and parsed.database != ":memory:" and not uri:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 5})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def _loads(text: str) -> dict[Any, int]:
    return from_json(json.loads(text))


class SqlStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = create_store_engine(url)

    def migrate(self) -> None:
        with self._errors("migrating"):
            migrate.upgrade(self.engine)

    def check(self) -> None:
        with self._errors("checking"):
            current = migrate.current_revision(self.engine)
        head = migrate.head_revision()
        if current != head:
            raise StoreUnavailable(f"database schema is at {current}, not at {head}")

    def close(self) -> None:
        self.engine.dispose()

    def load(self) -> StoredState:
        with self._errors("loading"), self.engine.connect() as conn:
            return self.load_rows(conn)

    def load_rows(self, conn: Connection) -> StoredState:
        """Every stored query (with its pending checkpoints) and group."""
        return self.assemble(
            conn.execute(select(queries)).mappings().all(),
            conn.execute(
                select(pending_checkpoints).order_by(
                    pending_checkpoints.c.query_id, pending_checkpoints.c.checkpoint_id
                )
            ).mappings(),
            conn.execute(select(consumer_groups)).mappings().all(),
        )

    @classmethod
    def assemble(
        cls,
        query_rows: Iterable[RowMapping],
        pending_rows: Iterable[RowMapping],
        group_rows: Iterable[RowMapping],
    ) -> StoredState:
        """The state held by rows of the three tables; every pending row's query is among
        ``query_rows`` (in checkpoint order per query); a group's owner is known only if
        its query is among them."""
        loaded = {
            row["query_id"]: QueryState(
                row["query_id"],
                row["group_id"],
                row["registered_at"],
                last_completed_id=row["last_completed_id"],
                last_run_id=row["last_run_id"],
            )
            for row in query_rows
        }
        for row in pending_rows:
            query = loaded[row["query_id"]]
            query.pending[row["checkpoint_id"]] = Checkpoint(
                query.query_id,
                query.group_id,
                row["checkpoint_id"],
                row["run_id"],
                _loads(row["offsets"]),
                row["created_at"],
            )
        owners = {q.group_id: q.query_id for q in loaded.values()}
        groups = [cls._group(row, owners.get(row["group_id"])) for row in group_rows]
        return StoredState(list(loaded.values()), groups)

    @staticmethod
    def _group(row: Any, owner: str | None) -> GroupState:
        group = GroupState(
            row["group_id"],
            query_id=owner,
            rewind_allowed=row["rewind_allowed"],
            commit_interval=row["commit_interval_seconds"],
            cluster=row["cluster"],
        )
        if row["slot_checkpoint_id"] is not None:
            group.slot = Checkpoint(
                row["slot_query_id"],
                row["group_id"],
                row["slot_checkpoint_id"],
                row["slot_run_id"],
                _loads(row["slot_offsets"]),
                row["slot_completed_at"],
            )
        if row["committed_checkpoint_id"] is not None:
            group.committed = CommittedOffsets(
                row["committed_query_id"],
                row["committed_checkpoint_id"],
                _loads(row["committed_offsets"]),
                row["committed_at"],
            )
        return group

    def persist(self, changes: Sequence[Change]) -> None:
        if not any(type(change) in WRITTEN for change in changes):
            return
        with self._errors("writing"), self.engine.begin() as conn:
            write_changes(conn, changes)

    def _errors(self, doing: str) -> AbstractContextManager[None]:
        return _database_errors(doing, self.url)


@contextmanager
def _database_errors(doing: str, url: str) -> Iterator[None]:
    """Database errors become ``StoreRefused`` (a value it cannot hold), ``StoreUnavailable``
    (retry later) or ``StoreError`` (a constraint broken: a bug)."""
    try:
        yield
    except DataError as exc:  # NUL in PostgreSQL's text, a value over a column's size, ...
        raise StoreRefused(f"database {_safe(url)} refused a value: {_first_line(exc)}") from exc
    except UnicodeError as exc:  # the driver could not encode a value (a lone surrogate)
        raise StoreRefused(f"database {_safe(url)} refused a value: {exc}") from exc
    except IntegrityError as exc:
        raise StoreError(f"database {_safe(url)} refused {doing}: {_first_line(exc)}") from exc
    except DBAPIError as exc:
        raise StoreUnavailable(
            f"database {_safe(url)} failed while {doing}: {_first_line(exc)}"
        ) from exc
    except SQLAlchemyError as exc:
        raise StoreError(f"database {_safe(url)} failed while {doing}: {exc}") from exc


def _safe(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _first_line(exc: DBAPIError) -> str:
    return str(exc.orig or exc).splitlines()[0]
