"""The database side of replica leases (``core.ledger.leases`` states the rules L1-L5).

PostgreSQL only: every expiry is set and judged by the database's clock (``DATABASE_NOW``),
so the replicas' clocks never meet. Each method runs short transactions and blocks.

No lease statement waits for a row lock: renewals, claims and releases skip rows a batch
is writing (``SKIP LOCKED``), so they never deadlock with batches; a skipped row is not
renewed this round, so not counted as held (L3). A batch waits for a renewal holding its
row, so a renewal holds ``RENEWED_A_TRANSACTION`` groups a transaction. Row locks are
``FOR NO KEY UPDATE``: they do not conflict with a foreign key check's ``KEY SHARE``
(a status report being written). The group rows are renewed, not a row per replica, so
that a renewal and a claim racing for a group serialise on its row lock and exactly one
gets it; the ``replicas`` rows only count the live replicas for the fair share (L4).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Float,
    Row,
    String,
    any_,
    bindparam,
    delete,
    func,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.sql.elements import ColumnElement

from spark_offset_sidecar.adapters.sql.schema import consumer_groups, replicas
from spark_offset_sidecar.ports.leases import Renewal

groups_c, replicas_c = consumer_groups.c, replicas.c
DATABASE_NOW: ColumnElement[float] = literal_column("EXTRACT(EPOCH FROM now())::float8", Float)
# The most groups one renewal transaction holds the rows of (~4 ms of PostgreSQL's time):
# docs/decisions.md, "Lease renewals 256 groups a transaction".
RENEWED_A_TRANSACTION = 256
# How long a replica leaving tries again to free the groups whose rows batches were
# writing (a batch holds a row for milliseconds); any still held then expire with their lease.
LEAVE_SECONDS = 2.0
LEAVE_RETRY_SECONDS = 0.02


def _renew_some(now: ColumnElement[float]) -> Any:
    """Renew those of ``ids`` still this replica's and not being written (each looked up by
    its key: the statement's cost follows the ids, not the table)."""
    return (
        update(consumer_groups)
        .where(
            groups_c.group_id.in_(
                select(groups_c.group_id)
                .where(
                    groups_c.group_id == any_(bindparam("ids", type_=ARRAY(String))),
                    groups_c.owner_id == bindparam("me"),
                )
                .with_for_update(skip_locked=True, key_share=True)
                .scalar_subquery()
            ),
            groups_c.owner_id == bindparam("me"),
        )
        .values(owner_expires_at=now + bindparam("lease", type_=Float))
        .returning(groups_c.group_id, groups_c.owner_epoch)
    )


class LeaseStore:
    """The ``Leases`` port on PostgreSQL: leases of ``lease`` seconds, set and judged by
    the time ``now`` says (an SQL expression evaluated in each statement: the database's
    clock, or one that a test moves)."""

    def __init__(
        self,
        engine: Engine,
        replica_id: str,
        lease: float,
        *,
        now: ColumnElement[float] = DATABASE_NOW,
    ) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError("replica leases need PostgreSQL")
        self.engine = engine
        self.replica_id = replica_id
        self.lease = lease
        self.now = now
        self._renew_statement = _renew_some(now)

    def renew(self) -> Renewal:
        """Extend this replica's lease and those of its groups (L1), a few groups a
        transaction: those it owned as the renewal began (a claim comes after, in the same
        round)."""
        now = self.now
        expires = now + self.lease
        with self.engine.connect() as conn:
            with conn.begin():
                conn.execute(
                    insert(replicas)
                    .values(replica_id=self.replica_id, started_at=now, expires_at=expires)
                    .on_conflict_do_update(
                        index_elements=["replica_id"], set_={"expires_at": expires}
                    )
                )
                conn.execute(delete(replicas).where(replicas_c.expires_at < now - 10 * self.lease))
                live = conn.scalar(select(func.count()).where(replicas_c.expires_at > now))
                total = conn.scalar(select(func.count()).select_from(consumer_groups))
                mine: list[str] = list(conn.scalars(select(groups_c.group_id).where(self._mine)))
            held: dict[str, int] = {}
            for first in range(0, len(mine), RENEWED_A_TRANSACTION):
                with conn.begin():
                    held.update(self._renew_some(conn, mine[first : first + RENEWED_A_TRANSACTION]))
        return Renewal(held, int(total or 0), int(live or 1))

    def _renew_some(self, conn: Connection, group_ids: list[str]) -> dict[str, int]:
        params = {"ids": group_ids, "me": self.replica_id, "lease": self.lease}
        return _epochs(conn.execute(self._renew_statement, params).all())

    def claim(self, limit: int) -> dict[str, int]:
        """Take up to ``limit`` groups that have no owner or whose lease expired (L1, L2)."""
        if limit <= 0:
            return {}
        with self.engine.begin() as conn:
            free = (
                select(groups_c.group_id)
                .where(groups_c.owner_id.is_(None) | (groups_c.owner_expires_at < self.now))
                .order_by(groups_c.group_id)
                .limit(limit)
                .with_for_update(skip_locked=True, key_share=True)
            )
            taken = conn.execute(
                update(consumer_groups)
                .where(groups_c.group_id.in_(free.scalar_subquery()))
                .values(
                    owner_id=self.replica_id,
                    owner_epoch=groups_c.owner_epoch + 1,
                    owner_expires_at=self.now + self.lease,
                )
                .returning(groups_c.group_id, groups_c.owner_epoch)
            ).all()
        return _epochs(taken)

    def release(self, group_ids: Collection[str]) -> None:
        """Let go of groups (no commit of them may be in flight)."""
        if group_ids:
            with self.engine.begin() as conn:
                self._release(conn, groups_c.group_id.in_(list(group_ids)))

    def leave(self) -> None:
        """On a clean shutdown with no commit in flight: free every group at once. A group
        whose row a batch is writing is skipped (no lease statement waits for a row lock)
        and freed again as soon as the batch has ended, for ``LEAVE_SECONDS`` at most: left
        held, it would wait a whole lease for another replica (a rolling upgrade under
        load showed it, 29 s at the default lease)."""
        deadline = time.monotonic() + LEAVE_SECONDS
        while True:
            with self.engine.begin() as conn:
                self._release(conn, True)
                held = conn.scalar(select(func.count()).where(self._mine))
                if not held or time.monotonic() >= deadline:
                    conn.execute(delete(replicas).where(replicas_c.replica_id == self.replica_id))
                    return
            time.sleep(LEAVE_RETRY_SECONDS)

    @property
    def _mine(self) -> ColumnElement[bool]:
        return groups_c.owner_id == self.replica_id

    def _release(self, conn: Connection, which: Any) -> None:
        """Free those of this replica's groups ``which`` selects that no batch is writing."""
        unlocked = (
            select(groups_c.group_id)
            .where(self._mine, which)
            .with_for_update(skip_locked=True, key_share=True)
        )
        conn.execute(
            update(consumer_groups)
            .where(groups_c.group_id.in_(unlocked.scalar_subquery()), self._mine)
            .values(owner_id=None, owner_expires_at=None)
        )


def _epochs(rows: Sequence[Row[str, int]]) -> dict[str, int]:
    return {str(group_id): int(epoch) for group_id, epoch in rows}
