"""``LedgerStore`` on SQLAlchemy 2: SQLite (a file, WAL) by default, PostgreSQL by URL.

Each ``persist`` is one transaction. SQLite runs with ``synchronous=FULL`` in WAL mode so
that a committed transaction survives power loss, not only a killed process: a 2xx
answer means the event is on disk.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, delete, event, insert, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, SQLAlchemyError

from service import migrate
from service.changes import (
    Change,
    Checkpoint,
    CheckpointAdded,
    CheckpointCompleted,
    CommitSucceeded,
    QueryRegistered,
    QueryReleased,
    RewindAllowed,
)
from service.db_schema import consumer_groups, pending_checkpoints, queries
from service.errors import StoreError, StoreUnavailable
from service.ledger import CommittedOffsets, GroupState, QueryState
from service.offsets import OffsetMap, from_json, to_json
from service.store import StoredState

log = logging.getLogger(__name__)


def create_store_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
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


def _dumps(offsets: OffsetMap) -> str:
    return json.dumps(to_json(offsets), separators=(",", ":"))


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
            query_rows = conn.execute(select(queries)).mappings().all()
            pending_rows = conn.execute(
                select(pending_checkpoints).order_by(
                    pending_checkpoints.c.query_id, pending_checkpoints.c.checkpoint_id
                )
            ).mappings()
            group_rows = conn.execute(select(consumer_groups)).mappings().all()
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
            groups = [self._group(row, owners.get(row["group_id"])) for row in group_rows]
        return StoredState(list(loaded.values()), groups)

    @staticmethod
    def _group(row: Any, owner: str | None) -> GroupState:
        group = GroupState(row["group_id"], query_id=owner, rewind_allowed=row["rewind_allowed"])
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
        writes = [change for change in changes if type(change) in _WRITERS]
        if not writes:
            return
        with self._errors("writing"), self.engine.begin() as conn:
            for change in writes:
                _WRITERS[type(change)](conn, change)

    def _errors(self, doing: str) -> AbstractContextManager[None]:
        return _database_errors(doing, self.url)


@contextmanager
def _database_errors(doing: str, url: str) -> Iterator[None]:
    """Database errors become ``StoreUnavailable`` (retry later) or ``StoreError``."""
    try:
        yield
    except (IntegrityError, DataError) as exc:
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


_EMPTY_SLOT = {
    "slot_query_id": None,
    "slot_checkpoint_id": None,
    "slot_run_id": None,
    "slot_offsets": None,
    "slot_completed_at": None,
}


def _registered(conn: Connection, change: QueryRegistered) -> None:
    conn.execute(
        insert(queries).values(
            query_id=change.query_id, group_id=change.group_id, registered_at=change.at
        )
    )
    known = conn.execute(
        select(consumer_groups.c.group_id).where(consumer_groups.c.group_id == change.group_id)
    ).first()
    if known is None:
        conn.execute(insert(consumer_groups).values(group_id=change.group_id, rewind_allowed=False))


def _added(conn: Connection, change: CheckpointAdded) -> None:
    checkpoint = change.checkpoint
    if change.dropped:
        conn.execute(
            delete(pending_checkpoints).where(
                pending_checkpoints.c.query_id == checkpoint.query_id,
                pending_checkpoints.c.checkpoint_id.in_(change.dropped),
            )
        )
    conn.execute(
        insert(pending_checkpoints).values(
            query_id=checkpoint.query_id,
            checkpoint_id=checkpoint.checkpoint_id,
            run_id=checkpoint.run_id,
            offsets=_dumps(checkpoint.offsets),
            created_at=checkpoint.created_at,
        )
    )


def _completed(conn: Connection, change: CheckpointCompleted) -> None:
    checkpoint = change.checkpoint
    conn.execute(
        delete(pending_checkpoints).where(
            pending_checkpoints.c.query_id == checkpoint.query_id,
            pending_checkpoints.c.checkpoint_id <= checkpoint.checkpoint_id,
        )
    )
    conn.execute(
        update(queries)
        .where(queries.c.query_id == checkpoint.query_id)
        .values(last_completed_id=checkpoint.checkpoint_id, last_run_id=checkpoint.run_id)
    )
    conn.execute(
        update(consumer_groups)
        .where(consumer_groups.c.group_id == checkpoint.group_id)
        .values(
            slot_query_id=checkpoint.query_id,
            slot_checkpoint_id=checkpoint.checkpoint_id,
            slot_run_id=checkpoint.run_id,
            slot_offsets=_dumps(checkpoint.offsets),
            slot_completed_at=change.at,
        )
    )


def _succeeded(conn: Connection, change: CommitSucceeded) -> None:
    request = change.request
    values: dict[str, Any] = {
        "committed_query_id": request.query_id,
        "committed_checkpoint_id": request.checkpoint_id,
        "committed_offsets": _dumps(change.committed),
        "committed_at": change.at,
    }
    if request.rewind:
        values["rewind_allowed"] = False
    conn.execute(
        update(consumer_groups).where(consumer_groups.c.group_id == request.group_id).values(values)
    )
    # The slot keeps a newer entry that arrived while this commit was in flight.
    conn.execute(
        update(consumer_groups)
        .where(
            consumer_groups.c.group_id == request.group_id,
            consumer_groups.c.slot_query_id == request.query_id,
            consumer_groups.c.slot_checkpoint_id == request.checkpoint_id,
        )
        .values(_EMPTY_SLOT)
    )


def _released(conn: Connection, change: QueryReleased) -> None:
    conn.execute(
        delete(pending_checkpoints).where(pending_checkpoints.c.query_id == change.query_id)
    )
    conn.execute(delete(queries).where(queries.c.query_id == change.query_id))
    conn.execute(
        update(consumer_groups)
        .where(
            consumer_groups.c.group_id == change.group_id,
            consumer_groups.c.slot_query_id == change.query_id,
        )
        .values(_EMPTY_SLOT)
    )


def _rewind_allowed(conn: Connection, change: RewindAllowed) -> None:
    conn.execute(
        update(consumer_groups)
        .where(consumer_groups.c.group_id == change.group_id)
        .values(rewind_allowed=True)
    )


# CommitStarted and CommitFailed are not written: the slot row stays until a success.
_WRITERS: dict[type[Any], Callable[[Connection, Any], None]] = {
    QueryRegistered: _registered,
    CheckpointAdded: _added,
    CheckpointCompleted: _completed,
    CommitSucceeded: _succeeded,
    QueryReleased: _released,
    RewindAllowed: _rewind_allowed,
}
