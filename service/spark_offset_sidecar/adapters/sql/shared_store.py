"""``SqlStore`` shared by several replicas on one PostgreSQL (ledger R11, leases L2).

A batch of events is one transaction: ``begin`` locks the batch's queries and groups (and
their partners) with transaction-scoped advisory locks, in one sorted order so that two
replicas' batches never deadlock, and loads their rows for the ledger to refresh (R11);
``persist`` writes the ledger's changes, drops successes whose fence no longer holds (L2),
tells the other replicas which groups changed (``NOTIFY``, delivered at commit:
``change_notices``) and commits; ``abort`` rolls back. Every row a batch writes is under
its advisory locks; lease columns change outside them, in statements that skip locked
rows (``lease_store``). One connection serves the batches; a failed batch drops it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Collection, Sequence

from sqlalchemy import Connection, String, any_, bindparam, or_, select, text
from sqlalchemy.dialects import postgresql

from spark_offset_sidecar.adapters.sql import change_notices
from spark_offset_sidecar.adapters.sql.schema import consumer_groups, pending_checkpoints, queries
from spark_offset_sidecar.adapters.sql.store import PENDING_IN_ORDER, SqlStore
from spark_offset_sidecar.adapters.sql.writes import write_changes
from spark_offset_sidecar.core.ledger.changes import (
    Change,
    CheckpointCompleted,
    CommitIntervalSet,
    CommitSucceeded,
    QueryRegistered,
    QueryReleased,
    RewindAllowed,
)
from spark_offset_sidecar.ports.store import LoadedRows, StoredState

log = logging.getLogger(__name__)

# A batch's statements have constant text, whatever its size (the ids go as arrays), so
# SQLAlchemy compiles each once and PostgreSQL prepares it after a few uses.
_IDS = postgresql.ARRAY(String)
_NAMED_OR_PARTNER = or_(
    queries.c.query_id == any_(bindparam("q", type_=_IDS)),
    queries.c.group_id == any_(bindparam("g", type_=_IDS)),
)
_PARTNERS = select(queries.c.query_id, queries.c.group_id).where(_NAMED_OR_PARTNER)
_QUERIES = select(queries).where(_NAMED_OR_PARTNER)
_PENDING = PENDING_IN_ORDER.where(
    pending_checkpoints.c.query_id == any_(bindparam("q", type_=_IDS))
)
_GROUPS = select(consumer_groups).where(
    consumer_groups.c.group_id == any_(bindparam("g", type_=_IDS))
)
# One statement takes many locks in key order: PostgreSQL evaluates a volatile function of
# the output after ORDER BY's sort (since 9.6), one row after another.
_LOCK_KEYS = text(
    "SELECT pg_advisory_xact_lock(k) FROM unnest(CAST(:keys AS bigint[])) AS k ORDER BY k"
)


def lock_key(kind: str, name: str) -> int:
    """A signed 64-bit advisory lock key for a query ("q") or group ("g")."""
    digest = hashlib.blake2b(f"{kind}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class SharedSqlStore(SqlStore):
    def __init__(
        self,
        url: str,
        replica_id: str,
        *,
        on_fenced: Callable[[int], None] = lambda n: None,
        on_step: Callable[[str, float], None] = lambda step, seconds: None,
    ) -> None:
        super().__init__(url)
        if self.engine.dialect.name != "postgresql":
            raise ValueError("several replicas need PostgreSQL")
        self.replica_id = replica_id
        self.on_fenced = on_fenced
        self.on_step = on_step  # (step, CPU seconds of this thread in it), as each ends
        self._conn: Connection | None = None
        self._batch: Connection | None = None  # the open batch's, between begin and persist

    def begin(self, query_ids: Collection[str], group_ids: Collection[str]) -> LoadedRows:
        self.abort()
        with self._errors("locking"):
            steps = _Steps(self.on_step)
            conn = self._batch = self._connection()
            conn.begin()
            qids, gids = _reach(conn, set(query_ids), set(group_ids))
            steps.done("reach")
            locked: set[int] = set()
            _lock(conn, qids, gids, locked)
            steps.done("lock")
            while True:  # found a partner not locked yet (it moved meanwhile): lock it too
                stored = self._load_batch(conn, qids, gids)
                steps.done("load")
                for query in stored.queries:
                    qids.add(query.query_id)
                    gids.add(query.group_id)
                if not _lock(conn, qids, gids, locked):
                    break
                steps.done("lock")
        return LoadedRows(frozenset(qids), frozenset(gids), stored)

    def persist(self, changes: Sequence[Change]) -> None:
        conn, self._batch = self._batch, None
        if conn is None:
            super().persist(changes)
            return
        try:
            with self._errors("writing"):
                steps = _Steps(self.on_step)
                held = self._fenced_out(conn, changes)
                steps.done("fence")
                write_changes(conn, held)
                steps.done("write")
                self._notify(conn, changes)
                steps.done("notify")
                conn.commit()
                steps.done("commit")
        except BaseException:
            self._drop(conn)
            raise

    def snapshot(self) -> StoredState:
        with (
            self._errors("reading"),
            self.engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn,
        ):
            return self.load_rows(conn)

    def abort(self) -> None:
        conn, self._batch = self._batch, None
        if conn is not None:
            self._drop(conn)

    def close(self) -> None:
        self.abort()
        if self._conn is not None:
            self._drop(self._conn)
        super().close()

    def _connection(self) -> Connection:
        """The batches' connection, kept between batches (no pool check-out and ping)."""
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect()
        return self._conn

    def _drop(self, conn: Connection) -> None:
        """After a failed batch: close (rolls back) and connect anew next time."""
        self._conn = None
        with contextlib.suppress(Exception):
            conn.close()

    def _load_batch(self, conn: Connection, qids: set[str], gids: set[str]) -> StoredState:
        """The rows of ``qids``, of the queries of ``gids`` (partners), their pending
        checkpoints, and of ``gids``."""
        query_rows = conn.execute(_QUERIES, {"q": list(qids), "g": list(gids)}).mappings().all()
        loaded = [row["query_id"] for row in query_rows]
        return self.assemble(
            query_rows,
            conn.execute(_PENDING, {"q": loaded}).mappings() if loaded else (),
            conn.execute(_GROUPS, {"g": list(gids)}).mappings().all() if gids else (),
        )

    def _fenced_out(self, conn: Connection, changes: Sequence[Change]) -> list[Change]:
        """L2: a success is recorded only while its commit's owner epoch still holds."""
        fenced = {
            c.request.group_id: c.request.fence
            for c in changes
            if isinstance(c, CommitSucceeded) and c.request.fence is not None
        }
        if not fenced:
            return list(changes)
        rows = conn.execute(
            select(consumer_groups.c.group_id, consumer_groups.c.owner_epoch)
            .where(
                consumer_groups.c.owner_id == self.replica_id,
                consumer_groups.c.group_id.in_(list(fenced)),
            )
            .with_for_update(key_share=True)  # NO KEY UPDATE: reports' foreign keys pass
        ).all()
        held = {group_id: epoch for group_id, epoch in rows}
        lost = {g for g, epoch in fenced.items() if held.get(g) != epoch}
        if not lost:
            return list(changes)
        log.warning(
            "not recording commits of %d groups owned by another replica now: %s",
            len(lost),
            sorted(lost)[:10],
        )
        self.on_fenced(len(lost))
        return [
            c
            for c in changes
            if not (isinstance(c, CommitSucceeded) and c.request.group_id in lost)
        ]

    def _notify(self, conn: Connection, changes: Sequence[Change]) -> None:
        changed: set[str] = set()
        new: set[str] = set()
        for c in changes:
            if isinstance(c, CheckpointCompleted):
                changed.add(c.checkpoint.group_id)
            elif isinstance(c, QueryRegistered):
                new.add(c.group_id)
            elif isinstance(c, QueryReleased | RewindAllowed | CommitIntervalSet):
                changed.add(c.group_id)
        for notice in change_notices.encode(self.replica_id, sorted(changed), sorted(new)):
            conn.execute(text("SELECT pg_notify(:channel, :payload)"), {
                "channel": change_notices.CHANNEL, "payload": notice
            })  # fmt: skip


class _Steps:
    """The CPU this thread spends in each step of a batch, told to ``on_step`` as each
    ends (``time.thread_time``: waiting for PostgreSQL is not counted)."""

    def __init__(self, on_step: Callable[[str, float], None]) -> None:
        self.on_step = on_step
        self.mark = time.thread_time()

    def done(self, step: str) -> None:
        now = time.thread_time()
        self.on_step(step, now - self.mark)
        self.mark = now


def _lock(conn: Connection, qids: set[str], gids: set[str], locked: set[int]) -> bool:
    """Take the advisory locks of ``qids`` and ``gids`` not in ``locked`` (added to it), in
    key order; whether there were any."""
    keys = {lock_key("q", q) for q in qids} | {lock_key("g", g) for g in gids}
    new = sorted(keys - locked)
    if new:
        conn.execute(_LOCK_KEYS, {"keys": new}).all()
        locked.update(new)
    return bool(new)


def _reach(conn: Connection, qids: set[str], gids: set[str]) -> tuple[set[str], set[str]]:
    """The queries and groups one batch may touch: those named, plus each one's partner."""
    if not qids and not gids:
        return qids, gids
    for query_id, group_id in conn.execute(_PARTNERS, {"q": list(qids), "g": list(gids)}):
        qids.add(str(query_id))
        gids.add(str(group_id))
    return qids, gids
