"""Change notices between replicas over PostgreSQL's ``LISTEN`` / ``NOTIFY``.

The shared store (``shared_store``) sends, inside each batch's transaction, which groups
the batch changed and which are new; PostgreSQL delivers them when it commits, to every
listening replica (the sender's own included). ``PostgresChangeNotices`` follows them for
the lease keeper (the ``ChangeNotices`` port).

A payload is JSON ``{"from": replica, "changed": [...], "new": [...]}`` within
PostgreSQL's size limit: a batch that touched many groups sends several.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from sqlalchemy.engine import make_url

from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.ports.leases import ChangeNotice

log = logging.getLogger(__name__)

CHANNEL = "offset_sidecar_groups"
NOTICE_BYTES = 7000  # PostgreSQL's payload limit is 8000
RECONNECT_BACKOFF = Backoff(initial=0.5, cap=10.0)


def encode(replica_id: str, changed: list[str], new: list[str]) -> list[str]:
    """The payloads that tell every replica these groups changed or are new."""
    out: list[str] = []
    items = [("changed", g) for g in changed] + [("new", g) for g in new]
    while items:
        body: dict[str, object] = {"from": replica_id, "changed": [], "new": []}
        size = len(json.dumps(body))
        while items:
            kind, group = items[0]
            cost = len(json.dumps(group)) + 2
            if size + cost > NOTICE_BYTES and (body["changed"] or body["new"]):
                break
            body[kind].append(group)  # type: ignore[attr-defined]
            size += cost
            items.pop(0)
        out.append(json.dumps(body, separators=(",", ":")))
    return out


def decode(payload: str) -> ChangeNotice:
    body = json.loads(payload)
    return ChangeNotice(str(body["from"]), tuple(body["changed"]), tuple(body["new"]))


class PostgresChangeNotices:
    """Follows ``CHANNEL`` on a connection of its own (autocommit, outside any pool)."""

    def __init__(self, database_url: str) -> None:
        url = make_url(database_url).set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)

    async def follow(
        self,
        on_connected: Callable[[], Awaitable[None]],
        on_notice: Callable[[ChangeNotice], None],
    ) -> None:
        import psycopg  # the postgres extra: only replicas come here

        failures = 0  # in a row, since the last connection
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    failures = 0
                    await on_connected()
                    async for notice in conn.notifies():
                        on_notice(decode(notice.payload))
            except (psycopg.Error, OSError) as exc:
                log.warning("not hearing other replicas' changes (retrying): %s", exc)
            failures += 1
            await asyncio.sleep(RECONNECT_BACKOFF.delay(failures))
