"""Keeps this replica's leases (rules L1-L5 in ``service.leases``) and hears which of its
groups other replicas changed.

Every ``lease / 6`` seconds, and at once when another replica registers a new group, a
round: renew this replica's leases, claim free groups up to the fair share, release idle
groups above it, refresh newly claimed groups from the store, and only then let the
commit loop take them (L5). A round that cannot reach the database changes nothing: the
commit deadline (L3) passes on its own and the replica stops committing.

``listen`` follows PostgreSQL notifications (``service.shared_store``): a group this
replica owns that another replica changed is refreshed from the store and the commit loop
woken; on every (re)connection all owned groups are refreshed, for notices missed while
disconnected.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

import psycopg
from sqlalchemy.engine import make_url

from service.durable_ledger import DurableLedger
from service.lease_store import LeaseStore
from service.leases import Ownership, claim_count, release_count
from service.shared_store import CHANNEL

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(
        self,
        store: LeaseStore,
        ownership: Ownership,
        durable: DurableLedger,
        *,
        on_owned: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.ownership = ownership
        self.durable = durable
        self.on_owned = on_owned  # groups became ours to commit: wake the commit loop
        self.clock = clock
        self.interval = ownership.lease / 6
        self._wake = asyncio.Event()
        self._refreshes: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.round()
            except Exception as exc:  # the database is away: L3 stops commits on its own
                log.warning("could not renew leases: %s", exc)
            try:
                async with asyncio.timeout(self.interval):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def round(self) -> None:
        started = self.clock()
        renewal = await asyncio.to_thread(self.store.renew)
        held = dict(renewal.held)
        wanted = claim_count(len(held), renewal.groups, renewal.replicas)
        claimed = await asyncio.to_thread(self.store.claim, wanted) if wanted else {}
        held.update(claimed)
        excess = release_count(len(held), renewal.groups, renewal.replicas)
        if excess:
            flying = {g for g, state in self.durable.ledger.groups.items() if state.in_flight}
            idle = sorted(g for g in held if g not in flying)[:excess]
            known = self.ownership.epochs  # L5: nothing unrefreshed becomes committable
            self._set(
                started, {g: e for g, e in held.items() if g not in idle and known.get(g) == e}
            )
            await asyncio.to_thread(self.store.release, idle)
            for group_id in idle:
                del held[group_id]
        new = {g for g, e in held.items() if self.ownership.epochs.get(g) != e}
        if new:
            try:
                await self.durable.refresh(new)
            except Exception as exc:
                log.warning("could not load %d claimed groups, next round: %s", len(new), exc)
                held = {g: e for g, e in held.items() if g not in new}
                new = set()
        self._set(started, held)
        if claimed or excess:
            log.info(
                "leases: %d groups held (%d claimed, %d released) of %d, %d replicas",
                len(held),
                len(claimed),
                excess,
                renewal.groups,
                renewal.replicas,
            )
        if new:
            self.on_owned()

    def _set(self, renewed: float, held: dict[str, int]) -> None:
        self.ownership.renewed_at(renewed, held)
        self.durable.ledger.commit_only(held)

    async def leave(self, *, clean: bool) -> None:
        """Shutting down: free every group now if no commit can still reach Kafka
        (``clean``), else leave them to expire (L3)."""
        self._set(self.clock(), {})
        if clean:
            await asyncio.to_thread(self.store.leave)

    async def listen(self, database_url: str) -> None:
        conninfo = make_url(database_url).set(drivername="postgresql")
        delay = 0.5
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    conninfo.render_as_string(hide_password=False), autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    delay = 0.5
                    await self._refresh_owned(set(self.ownership.epochs))
                    async for notice in conn.notifies():
                        self._heard(notice.payload)
            except (psycopg.Error, OSError) as exc:
                log.warning("not hearing other replicas' changes (retrying): %s", exc)
            await asyncio.sleep(delay)
            delay = min(10.0, delay * 2)

    def _heard(self, payload: str) -> None:
        notice = json.loads(payload)
        if notice["new"]:  # ours too: claim it now, not at the next round
            self.wake()
        if notice["from"] == self.store.replica_id:
            return
        owned = {g for g in notice["changed"] if self.ownership.owns(g)}
        if owned:
            task = asyncio.get_running_loop().create_task(self._refresh_owned(owned))
            self._refreshes.add(task)
            task.add_done_callback(self._refreshes.discard)

    async def _refresh_owned(self, group_ids: set[str]) -> None:
        if not group_ids:
            return
        try:
            await self.durable.refresh(group_ids)
        except Exception as exc:
            log.warning("could not refresh %d groups: %s", len(group_ids), exc)
        self.on_owned()
