"""The ``WatcherPairing`` port on PostgreSQL: a watcher's claim on a replica, in that
replica's row of ``replicas`` (``watcher_id``, ``watcher_url``, ``watcher_expires_at``;
migration 0008). The replica reads its watcher's URL with its own lease renewal
(``lease_store``).

Every expiry is set and judged by the database's clock, as the leases' are. A claim locks
the replica's row and re-checks it on the row itself (``FOR UPDATE SKIP LOCKED``; under
READ COMMITTED a row locked after another watcher's claim committed is judged on that
claim), so two watchers racing for a replica serialise and one of them gets it; the other
takes the next replica or none. A renewal waits for the row's lock rather than skip it (a
replica's renewal holds it for a moment): a skipped row would look lost, and the watcher
would claim a second replica while its first claim still lived.
"""

from __future__ import annotations

from sqlalchemy import Engine, Float, String, bindparam, literal_column, null, select, update
from sqlalchemy.sql.elements import ColumnElement

from spark_offset_sidecar.adapters.sql.schema import replicas

replicas_c = replicas.c
_DB_NOW: ColumnElement[float] = literal_column("EXTRACT(EPOCH FROM now())::float8", Float)
_ME = bindparam("me", type_=String)
_LIVE_REPLICA = replicas_c.expires_at > _DB_NOW

_RENEW = (
    update(replicas)
    .where(replicas_c.watcher_id == _ME, _LIVE_REPLICA)
    .values(
        watcher_url=bindparam("url"),
        watcher_expires_at=_DB_NOW + bindparam("lease", type_=Float),
    )
    .returning(replicas_c.replica_id)
)
_FREE = (
    select(replicas_c.replica_id)
    .where(
        _LIVE_REPLICA,
        replicas_c.watcher_id.is_(None)
        | (replicas_c.watcher_expires_at.is_(None))
        | (replicas_c.watcher_expires_at < _DB_NOW),
    )
    .order_by(replicas_c.started_at, replicas_c.replica_id)
    .limit(1)
    .with_for_update(skip_locked=True)
)
_CLAIM = (
    update(replicas)
    .where(replicas_c.replica_id == _FREE.scalar_subquery())
    .values(
        watcher_id=_ME,
        watcher_url=bindparam("url"),
        watcher_expires_at=_DB_NOW + bindparam("lease", type_=Float),
    )
    .returning(replicas_c.replica_id)
)
_LEAVE = (
    update(replicas)
    .where(replicas_c.watcher_id == _ME)
    .values(watcher_id=null(), watcher_url=null(), watcher_expires_at=null())
)


class SqlWatcherPairing:
    def __init__(self, engine: Engine, watcher_id: str, url: str, lease: float) -> None:
        if engine.dialect.name != "postgresql":
            raise ValueError("pairing watchers with replicas needs PostgreSQL")
        self.engine = engine
        self.watcher_id = watcher_id
        self.url = url
        self.lease = lease

    def pair(self) -> str | None:
        params = {"me": self.watcher_id, "url": self.url, "lease": self.lease}
        with self.engine.begin() as conn:
            held = list(conn.scalars(_RENEW, params))
            if len(held) > 1:  # never by this module; kept to one if it ever were
                conn.execute(
                    _LEAVE.where(replicas_c.replica_id != held[0]), {"me": self.watcher_id}
                )
            if held:
                return str(held[0])
            # Its claim on a replica whose lease lapsed ends: were that replica to renew in
            # time, it would tell a watcher that no longer takes what it tells.
            conn.execute(_LEAVE, params)
            claimed = conn.scalar(_CLAIM, params)
        return None if claimed is None else str(claimed)

    def leave(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(_LEAVE, {"me": self.watcher_id})
