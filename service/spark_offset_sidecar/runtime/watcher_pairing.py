"""Keeps a watcher run on its own paired with one replica (``SIDECAR_WATCHER_ADVERTISED_URL``
and ``SIDECAR_WATCHER=paired``; the ``WatcherPairing`` port): the replica reads the pairing
with its lease renewal and tells the watcher at the URL it advertised, as it would tell a
child.

Every ``interval`` seconds (a sixth of the lease, as the replicas renew theirs) a step
renews the claim, or claims a replica with no live watcher. A change of replica (one
claimed, or the claim lost: the replica died, or this watcher could not renew within the
lease) calls ``on_change`` with the new replica's id or None.

Invariants
  - ``replica`` is the replica of the last step that reached the database; a step that did
    not leaves it (and logs why): the claim lives on to its expiry, and the replica keeps
    telling meanwhile.
  - ``on_change`` is called once for each change of ``replica``, in order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from spark_offset_sidecar.ports.watcher import WatcherPairing

log = logging.getLogger(__name__)


class PairingKeeper:
    def __init__(
        self,
        pairing: WatcherPairing,
        *,
        interval: float,
        on_change: Callable[[str | None], None],
    ) -> None:
        self._pairing = pairing
        self.interval = interval
        self._on_change = on_change
        self.replica: str | None = None

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.step()

    async def step(self) -> None:
        try:
            replica = await asyncio.to_thread(self._pairing.pair)
        except Exception as exc:  # the database is away: the claim lives to its expiry
            log.warning("could not renew the watcher's pairing: %s", exc)
            return
        if replica == self.replica:
            return
        if replica is None:
            log.info("paired with no replica: each live replica has a watcher (a spare)")
        else:
            log.info("paired with replica %s: it tells this watcher", replica)
        self.replica = replica
        self._on_change(replica)

    async def leave(self) -> None:
        """A clean stop: the replica's next renewal finds no watcher."""
        try:
            await asyncio.to_thread(self._pairing.leave)
        except Exception as exc:
            log.warning("could not end the watcher's pairing (it expires): %s", exc)
