"""``LedgerStore`` on SQLAlchemy 2: SQLite (a file, WAL) by default, PostgreSQL by URL.

Each ``persist`` is one transaction. SQLite runs with ``synchronous=FULL`` in WAL mode so
that a committed transaction survives power loss, not only a killed process: a 2xx
answer means the event is on disk.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    RowMapping,
    bindparam,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.sql.elements import BindParameter

from spark_offset_sidecar.adapters.sql import migrate
from spark_offset_sidecar.adapters.sql.schema import consumer_groups, pending_checkpoints, queries
from spark_offset_sidecar.adapters.sql.writes import WRITTEN, write_changes
from spark_offset_sidecar.core.ledger.changes import (
    Change,
    Checkpoint,
)
from spark_offset_sidecar.core.ledger.rules import CommittedOffsets, GroupState, QueryState
from spark_offset_sidecar.core.offsets import from_json
from spark_offset_sidecar.errors import StoreError, StoreRefused, StoreUnavailable
from spark_offset_sidecar.ports.store import LoadedRows, StoredMarks, StoredState

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
            for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
                dbapi_connection.execute(f"PRAGMA {pragma}")

        return engine
    return create_engine(url, pool_pre_ping=True)


def _loads(text: str) -> dict[Any, int]:
    return from_json(json.loads(text))


# What a follower compares (``marks``): every column a ledger loads that can change, but
# the offsets' text, which changes only with the checkpoint id beside it.
_groups, _pending, _queries = consumer_groups.c, pending_checkpoints.c, queries.c
_GROUP_MARKS = select(
    _groups.group_id,
    _groups.rewind_allowed,
    _groups.commit_interval_seconds,
    _groups.cluster,
    _groups.slot_query_id,
    _groups.slot_checkpoint_id,
    _groups.committed_query_id,
    _groups.committed_checkpoint_id,
    _groups.committed_at,
)
_QUERY_MARKS = select(
    _queries.query_id, _queries.group_id, _queries.last_completed_id, _queries.last_run_id
)
_PENDING_MARKS = select(
    _pending.query_id,
    func.count(),
    func.min(_pending.checkpoint_id),
    func.max(_pending.checkpoint_id),
).group_by(_pending.query_id)
_IDS: BindParameter[str] = bindparam("ids", expanding=True)
_QUERIES_NAMED = select(queries).where(_queries.query_id.in_(_IDS))
_QUERIES_OF_GROUPS = select(queries).where(_queries.group_id.in_(_IDS))
# Pending checkpoints in the order ``assemble`` needs: by query, then checkpoint.
PENDING_IN_ORDER = select(pending_checkpoints).order_by(_pending.query_id, _pending.checkpoint_id)
_PENDING_OF = PENDING_IN_ORDER.where(_pending.query_id.in_(_IDS))
_GROUPS_NAMED = select(consumer_groups).where(_groups.group_id.in_(_IDS))
_CHUNK = 500  # ids per statement: far below SQLite's and PostgreSQL's limits


class SqlStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = create_store_engine(url)
        self._named = f"database {make_url(url).render_as_string(hide_password=True)}"

    def migrate(self) -> None:
        with self._errors("migrating"):
            migrate.upgrade(self.engine)

    def refuse_newer_schema(self) -> None:
        """``SchemaFromNewerRelease`` if a newer release migrated the database (reads only)."""
        with self._errors("checking"), self.engine.connect() as connection:
            migrate.refuse_unknown(connection)

    def check(self) -> None:
        """``StoreUnavailable`` unless this release can read and write the database (at
        its newest migration, or within a newer release's window: ``migrate.unready``)."""
        with self._errors("checking"), self.engine.connect() as connection:
            problem = migrate.unready(connection)
        if problem is not None:
            raise StoreUnavailable(problem)

    def close(self) -> None:
        self.engine.dispose()

    def load(self) -> StoredState:
        with self._errors("loading"), self.engine.connect() as conn:
            return self.load_rows(conn)

    def load_rows(self, conn: Connection) -> StoredState:
        """Every stored query (with its pending checkpoints) and group."""
        return self.assemble(
            conn.execute(select(queries)).mappings().all(),
            conn.execute(PENDING_IN_ORDER).mappings(),
            conn.execute(select(consumer_groups)).mappings().all(),
        )

    def marks(self) -> StoredMarks:
        """Every stored query's and group's mark (``ports.store.LedgerRows``)."""
        with self._errors("reading"), self.engine.connect() as conn:
            pending = {row[0]: tuple(row[1:]) for row in conn.execute(_PENDING_MARKS)}
            return StoredMarks(
                {
                    row[0]: (row[1], (*row[2:], pending.get(row[0])))
                    for row in conn.execute(_QUERY_MARKS)
                },
                {row[0]: tuple(row[1:]) for row in conn.execute(_GROUP_MARKS)},
            )

    def rows(self, query_ids: Collection[str], group_ids: Collection[str]) -> LoadedRows:
        """The rows of ``query_ids`` and ``group_ids`` and of their partners."""
        with self._errors("reading"), self.engine.connect() as conn:
            found = {
                row["query_id"]: row
                for statement, ids in ((_QUERIES_NAMED, query_ids), (_QUERIES_OF_GROUPS, group_ids))
                for row in _chunked(conn, statement, ids)
            }
            qids = set(query_ids) | set(found)
            gids = set(group_ids) | {row["group_id"] for row in found.values()}
            stored = self.assemble(
                list(found.values()),
                _chunked(conn, _PENDING_OF, sorted(found)),
                _chunked(conn, _GROUPS_NAMED, gids),
            )
        return LoadedRows(frozenset(qids), frozenset(gids), stored)

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

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Database errors become ``StoreRefused`` (a value it cannot hold),
        ``StoreUnavailable`` (retry later) or ``StoreError`` (a constraint broken: a bug)."""
        where = self._named
        try:
            yield
        except DataError as exc:  # NUL in PostgreSQL's text, a value over a column's size, ...
            raise StoreRefused(f"{where} refused a value: {_first_line(exc)}") from exc
        except UnicodeError as exc:  # the driver could not encode a value (a lone surrogate)
            raise StoreRefused(f"{where} refused a value: {exc}") from exc
        except IntegrityError as exc:
            raise StoreError(f"{where} refused {doing}: {_first_line(exc)}") from exc
        except DBAPIError as exc:
            raise StoreUnavailable(f"{where} failed while {doing}: {_first_line(exc)}") from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"{where} failed while {doing}: {exc}") from exc


def _chunked(conn: Connection, statement: Any, ids: Collection[str]) -> list[RowMapping]:
    """``statement``'s rows for ``ids``, a chunk of ids at a time (in the order of the ids'
    chunks: pending rows stay in checkpoint order within a query)."""
    ordered = sorted(ids)
    return [
        row
        for at in range(0, len(ordered), _CHUNK)
        for row in conn.execute(statement, {"ids": ordered[at : at + _CHUNK]}).mappings()
    ]


def _first_line(exc: DBAPIError) -> str:
    return str(exc.orig or exc).splitlines()[0]
