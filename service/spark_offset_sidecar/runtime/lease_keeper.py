"""Keeps this replica's leases (rules L1-L5 in ``core.ledger.leases``; docs/run/replicas.md)
and hears which of its groups other replicas changed. Sees ports only (``ports.leases``).

A round (every ``lease / 6`` s, and at once when another replica registers a group):
renew, claim up to the fair share, release idle groups above it, refresh newly claimed
groups from the store, and only then let the commit loop take them (L5). A round that
cannot reach the database changes nothing: the commit deadline (L3) passes on its own.
``listen`` refreshes owned groups another replica changed, and all of them on every
(re)connection. ``read_back_after`` seconds after taking groups, their offsets are read
back from Kafka and a difference is counted, logged and repaired (ledger R12).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from spark_offset_sidecar.core.ledger.leases import Ownership, claim_count, release_count
from spark_offset_sidecar.core.offsets import describe
from spark_offset_sidecar.ports.kafka import CommittedOffsetsReader
from spark_offset_sidecar.ports.leases import ChangeNotice, ChangeNotices, Leases
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(
        self,
        store: Leases,
        notices: ChangeNotices,
        ownership: Ownership,
        durable: DurableLedger,
        *,
        on_owned: Callable[[], None],
        read_back: CommittedOffsetsReader | None = None,
        read_back_after: float = 10.0,
        on_mismatch: Callable[[str], None] = lambda group_id: None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.notices = notices
        self.ownership = ownership
        self.durable = durable
        self.on_owned = on_owned  # groups became ours to commit: wake the commit loop
        self.clock = clock
        self.wall_clock = wall_clock  # the ledger's clock (committed offsets' times)
        self.read_back = read_back
        self.read_back_after = read_back_after  # the old owner's last commit has landed
        self.on_mismatch = on_mismatch
        self.interval = ownership.lease / 6
        self._wake = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()  # refreshes and read-backs

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.round()
            except Exception as exc:  # the database is away: L3 stops commits on its own
                log.warning("could not renew leases: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

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
            if self.read_back is not None:
                self._spawn(self.read_back_taken(new))

    def _set(self, renewed: float, held: dict[str, int]) -> None:
        self.ownership.renewed_at(renewed, held)
        self.durable.ledger.commit_only(held)

    async def leave(self, *, clean: bool) -> None:
        """Shutting down: free every group now if no commit can still reach Kafka
        (``clean``), else leave them to expire (L3)."""
        self._set(self.clock(), {})
        if clean:
            await asyncio.to_thread(self.store.leave)

    async def listen(self) -> None:
        """Hear the other replicas' changes until cancelled."""
        await self.notices.follow(self._refresh_all, self._heard)

    async def _refresh_all(self) -> None:
        await self._refresh_owned(set(self.ownership.epochs))

    def _heard(self, notice: ChangeNotice) -> None:
        if notice.new:  # ours too: claim it now, not at the next round
            self.wake()
        if notice.sender == self.store.replica_id:
            return
        owned = {g for g in notice.changed if self.ownership.owns(g)}
        if owned:
            self._spawn(self._refresh_owned(owned))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def read_back_taken(self, group_ids: set[str]) -> None:
        """R12: after ``read_back_after``, compare what Kafka holds for ``group_ids`` with
        the stored committed offsets, and repair a difference."""
        assert self.read_back is not None
        await asyncio.sleep(self.read_back_after)
        for group_id in sorted(group_ids):
            if not self.ownership.owns(group_id):
                continue
            asked_at = self.wall_clock()
            try:
                in_kafka = await self.read_back.committed(group_id)
            except Exception as exc:
                log.warning("could not read back group %s after taking it: %s", group_id, exc)
                continue
            group = self.durable.ledger.groups.get(group_id)
            if (
                group is None
                or group.committed is None
                or group.committed.at > asked_at  # committed meanwhile: Kafka has it
                or group.slot is not None  # a commit follows anyway
                or group.in_flight is not None
            ):
                continue
            stored = group.committed.offsets
            differ = sorted(
                tp for tp in stored if tp not in in_kafka or in_kafka[tp].offset != stored[tp]
            )
            if not differ:
                continue
            self.on_mismatch(group_id)
            held = ", ".join(
                f"{tp.topic}/{tp.partition}@{in_kafka[tp].offset if tp in in_kafka else '-'}"
                for tp in differ
            )
            writers = sorted({in_kafka[tp].metadata for tp in differ if tp in in_kafka})
            log.warning(
                "after taking group %s, Kafka holds %s (written by %s) where the store says "
                "%s was committed last: committing the stored offsets again",
                group_id,
                held,
                ", ".join(writers) or "nobody",
                describe({tp: stored[tp] for tp in differ}),
            )
            if self.durable.ledger.repair(group_id):
                self.on_owned()

    async def _refresh_owned(self, group_ids: set[str]) -> None:
        if not group_ids:
            return
        try:
            await self.durable.refresh(group_ids)
        except Exception as exc:
            log.warning("could not refresh %d groups: %s", len(group_ids), exc)
        self.on_owned()
