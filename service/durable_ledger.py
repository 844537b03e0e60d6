"""The ledger joined to its store: decide, make durable, then apply.

Invariant: memory never holds an accepted event that the store does not. Events are
decided and persisted under one lock (so no decision is made on state another event is
about to change), and applied only after the write succeeded. Commit results are applied
even when their write fails: Kafka already holds the truth, and the store may lag Kafka
in what is committed (after a restart the same offsets are committed again, harmlessly).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from service.changes import CommitRequest, Decision
from service.errors import StoreError
from service.ledger import Backoff, Ledger
from service.store import LedgerStore

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


class DurableLedger:
    def __init__(
        self, ledger: Ledger, store: LedgerStore, worker: ThreadPoolExecutor | None = None
    ) -> None:
        self.ledger = ledger
        self.store = store
        self._lock = asyncio.Lock()
        # One thread: SQLite wants one writer, and writes stay in decision order.
        self._worker = worker or ThreadPoolExecutor(1, thread_name_prefix="ledger-store")

    @classmethod
    async def open(
        cls,
        store: LedgerStore,
        *,
        max_pending: int,
        backoff: Backoff,
        refresh_after: float | None = None,
    ) -> DurableLedger:
        """A ledger started from what ``store`` holds."""
        worker = ThreadPoolExecutor(1, thread_name_prefix="ledger-store")
        stored = await asyncio.get_running_loop().run_in_executor(worker, store.load)
        ledger = Ledger(
            max_pending=max_pending,
            backoff=backoff,
            refresh_after=refresh_after,
            queries=stored.queries,
            groups=stored.groups,
        )
        return cls(ledger, store, worker)

    async def record(self, decide: Callable[[Ledger], Decision]) -> Decision:
        """Decide an event, persist its changes, apply it. Raises ``StoreUnavailable``
        (memory unchanged) when the store cannot take the write."""
        async with self._lock:
            decision = decide(self.ledger)
            if decision.changes:
                await self._in_worker(self.store.persist, decision.changes)
            self.ledger.apply(decision)
            return decision

    def start_commit(self, group_id: str, now: float) -> CommitRequest | None:
        """Take the group's slot if it may commit now (see ``Ledger.take``)."""
        return self.ledger.take(group_id, now)

    async def finish_commit(self, request: CommitRequest, now: float, failure: str | None) -> None:
        change = self.ledger.commit_result(request, now, failure)
        try:
            await self._in_worker(self.store.persist, (change,))
        except StoreError:
            log.warning(
                "could not record the commit result of group %s checkpoint %s; "
                "it will be committed again after a restart",
                request.group_id,
                request.checkpoint_id,
                exc_info=True,
            )
        self.ledger.apply_change(change)

    async def check_store(self) -> None:
        await self._in_worker(self.store.check)

    async def close(self) -> None:
        await self._in_worker(self.store.close)
        self._worker.shutdown(wait=True)

    async def _in_worker(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, lambda: fn(*args, **kwargs))
