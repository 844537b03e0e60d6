"""The ledger joined to its store: decide, make durable, then answer -- in batches
(docs/guarantees.md: a 2xx means the event is on disk; group commit).

Invariants
  - Memory never keeps an event the store refused: events are decided and applied in
    arrival order under savepoints (R10), and a failed batch is rolled back newest first.
  - One caller's event never fails another's: a batch that fails for any reason but
    ``StoreUnavailable`` is written again event by event, so only the event at fault
    hears it; ``StoreUnavailable`` answers every event of the batch 503.
  - A group touched by a batch being written is held from the committer until the write
    is done: no commit carries offsets a rollback took back.
  - Commit results go through the same queue and stand even when their write fails:
    Kafka holds the truth, and the store may lag it (committed again after a restart).
  - One worker thread does every store call (SQLite wants one writer; decision order);
    the batches are written, one at a time, by a ``BatchWriter``: a writer process, or
    the store in that thread (``InStoreThread``).
  - A batch whose write may or may not have happened (``WriteOutcomeUnknown``) is
    answered 503, rolled back, and its rows taken in as stored (R11).
  - With a shared store, each batch first locks and loads what it touches (R11), and
    names at most ``LOCKED_NAMES`` queries and groups (see there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.ledger.changes import (
    Change,
    CommitFailed,
    CommitRequest,
    CommitSucceeded,
    Decision,
)
from spark_offset_sidecar.core.ledger.rules import Ledger, Savepoint
from spark_offset_sidecar.errors import StoreUnavailable, WriteOutcomeUnknown
from spark_offset_sidecar.ports.store import (
    BatchWriter,
    LedgerStore,
    LoadedRows,
    SharedLedgerStore,
    StoredState,
)

log = logging.getLogger(__name__)
# Queries and groups one batch names at most, with a shared store: each is an advisory lock
# in PostgreSQL's shared lock table (docs/decisions.md, "At most 256 names locked a transaction").
LOCKED_NAMES = 256
P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class _Event:
    decide: Callable[[Ledger], Decision]
    answer: asyncio.Future[Decision]
    query_id: str | None
    group_id: str | None


@dataclass
class _Refresh:
    group_ids: frozenset[str]
    query_ids: frozenset[str]
    done: asyncio.Future[None]


@dataclass
class _Result:
    change: CommitSucceeded | CommitFailed
    recorded: asyncio.Future[None]
    applied: bool = False  # written again after its batch failed: memory holds it already


@dataclass
class _Batch:
    """One transaction's worth: decided events with their savepoints, and results."""

    events: list[tuple[_Event, Decision, Savepoint]] = field(default_factory=list)
    results: list[_Result] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    # Results applied after a savepoint of their group in this batch: a rollback undoes
    # them with it, so they are applied again after it.
    undone_by_rollback: list[_Result] = field(default_factory=list)


def _names(item: _Event | _Result | _Refresh) -> int:
    """How many queries and groups ``item`` names (a batch locks each)."""
    if isinstance(item, _Refresh):
        return len(item.group_ids) + len(item.query_ids)
    if isinstance(item, _Result):
        return 1
    return (item.query_id is not None) + (item.group_id is not None)


def _decided_again(event: _Event) -> _Event:
    """``event``, to be decided again: one already decided is written even if its caller
    has gone (as it would have been with its batch), so it gets an answer of its own."""
    if not event.answer.cancelled():
        return event
    answer: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
    return _Event(event.decide, answer, event.query_id, event.group_id)


class DurableLedger:
    def __init__(
        self,
        ledger: Ledger,
        store: LedgerStore,
        worker: Executor,
        *,
        writer: BatchWriter,
        on_batch_done: Callable[[int, float], None] = lambda items, seconds: None,
    ) -> None:
        """``worker``: the store's one thread (shut down by ``close``); ``writer``: what
        writes the batches (closed by ``close``)."""
        self.ledger = ledger
        self.store = store
        self._worker = worker
        self.batch_writer = writer
        self._shared = isinstance(store, SharedLedgerStore)
        # Called after each batch with its size and write time; held groups are free.
        self._batch_done = on_batch_done
        self.batches_written = 0
        self._queue: list[_Event | _Result | _Refresh] = []
        self._writer: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        store: LedgerStore,
        *,
        thread: Executor,
        writer: BatchWriter,
        max_pending: int,
        backoff: Backoff,
        refresh_after: float | None = None,
        commit_interval: float = 0.0,
        on_batch_done: Callable[[int, float], None] = lambda items, seconds: None,
    ) -> DurableLedger:
        """A ledger started from what ``store`` holds, every store call in ``thread``, its
        batches written by ``writer`` (closed with it)."""
        stored = await asyncio.get_running_loop().run_in_executor(thread, store.load)
        ledger = Ledger(
            max_pending=max_pending,
            backoff=backoff,
            refresh_after=refresh_after,
            commit_interval=commit_interval,
            queries=stored.queries,
            groups=stored.groups,
        )
        return cls(ledger, store, thread, on_batch_done=on_batch_done, writer=writer)

    async def record(
        self,
        decide: Callable[[Ledger], Decision],
        *,
        query_id: str | None = None,
        group_id: str | None = None,
    ) -> Decision:
        """Decide an event on ``query_id`` and/or ``group_id``, persist its changes, apply
        it. Raises ``StoreUnavailable`` (memory unchanged) when the store cannot take the
        write."""
        answer: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._enqueue(_Event(decide, answer, query_id, group_id))
        # A caller cancelled while waiting cancels ``answer``: not yet decided, its event
        # is dropped; already decided, it is written all the same.
        return await answer

    async def refresh(self, group_ids: Iterable[str], query_ids: Iterable[str] = ()) -> None:
        """Take in the stored state of these groups and queries (shared store only; R11),
        ``LOCKED_NAMES`` of them a batch; raises the first batch's failure, if any."""
        groups, queries, n = sorted(set(group_ids)), sorted(set(query_ids)), LOCKED_NAMES
        parts: list[tuple[frozenset[str], frozenset[str]]] = [
            (frozenset(groups[i : i + n]), frozenset()) for i in range(0, len(groups), n)
        ]
        parts += [(frozenset(), frozenset(queries[i : i + n])) for i in range(0, len(queries), n)]
        dones: list[asyncio.Future[None]] = []
        for part_groups, part_queries in parts or [(frozenset(), frozenset())]:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._enqueue(_Refresh(part_groups, part_queries, done))
            dones.append(done)
        failures = await asyncio.gather(*dones, return_exceptions=True)
        for failure in failures:
            if isinstance(failure, BaseException):
                raise failure

    async def every_query(self) -> StoredState:
        """Every query and group as they stand, whichever replica took their events: alone,
        this process's memory (the store's state, and more current); with a shared store,
        a snapshot of it (a read: no lock, not in the writer's queue)."""
        if not isinstance(self.store, SharedLedgerStore):
            return StoredState(
                list(self.ledger.queries.values()), list(self.ledger.groups.values())
            )
        return await asyncio.to_thread(self.store.snapshot)

    async def current(self, query_ids: Iterable[str]) -> Ledger:
        """The ledger, with these queries' stored state taken in first when other replicas
        share the store (another may have taken their events: R11)."""
        if self._shared:
            await self.refresh((), query_ids)
        return self.ledger

    def start_commit(
        self, group_id: str, now: float, fence: int | None = None, *, flush: bool = False
    ) -> CommitRequest | None:
        """Take the group's slot if it may commit now (see ``Ledger.take``)."""
        return self.ledger.take(group_id, now, fence, flush=flush)

    async def finish_commit(self, request: CommitRequest, now: float, failure: str | None) -> None:
        """Record a commit's result; returns once it is applied (and written, if it could)."""
        change = self.ledger.commit_result(request, now, failure)
        recorded: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(_Result(change, recorded))
        await recorded  # cancelled or not, the result is applied and written

    async def check_store(self) -> None:
        await self._in_worker(self.store.check)

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer
        await self.batch_writer.close()
        await self._in_worker(self.store.close)
        self._worker.shutdown(wait=True)

    def _enqueue(self, item: _Event | _Result | _Refresh) -> None:
        self._queue.append(item)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_batches(), name="ledger-writer")

    async def _write_batches(self) -> None:
        while self._queue:
            await self._write(self._next_batch())

    def _next_batch(self) -> list[_Event | _Result | _Refresh]:
        """The whole queue; with a shared store, its oldest items that name at most
        ``LOCKED_NAMES`` queries and groups (at least one item)."""
        taken, names = len(self._queue), 0
        if self._shared:
            for index, item in enumerate(self._queue):
                names += _names(item)
                if index and names > LOCKED_NAMES:
                    taken = index
                    break
        items, self._queue = self._queue[:taken], self._queue[taken:]
        return items

    async def _write(  # noqa: C901, PLR0912  (a batch's kinds, each answered)
        self, items: list[_Event | _Result | _Refresh], *, alone: bool = False
    ) -> None:
        """Decide ``items`` and write them as one transaction, then answer them; a batch
        whose failure may be one event's is written again event by event."""
        started = time.monotonic()
        failure = await self._begin(items) if self._shared else None
        batch = self._decide(items)
        if failure is None and (batch.changes or self._shared):
            try:
                await self.batch_writer.write(batch.changes)
            except Exception as exc:  # StoreError, or anything the driver raised
                failure = exc
        if failure is not None and self._shared:
            assert isinstance(self.store, SharedLedgerStore)
            with contextlib.suppress(Exception):
                await self._in_worker(self.store.abort)
        self.batches_written += 1
        isolate = (
            failure is not None
            and not isinstance(failure, StoreUnavailable)
            and len(batch.events) > 1
            and not alone
        )
        if failure is None:
            self._keep(batch)
        else:
            self._roll_back(batch, failure, answer=not isolate)
        if isinstance(failure, WriteOutcomeUnknown) and isinstance(failure.stored, LoadedRows):
            stored = failure.stored
            self.ledger.refresh(
                stored.query_ids, stored.group_ids, stored.stored.queries, stored.stored.groups
            )
        refreshes = [item for item in items if isinstance(item, _Refresh)]
        for refresh in refreshes if not isolate else ():
            if refresh.done.done():
                continue
            if failure is None:
                refresh.done.set_result(None)
            else:
                refresh.done.set_exception(failure)
        self._batch_done(len(items), time.monotonic() - started)
        if isolate:
            log.warning(
                "a batch of %d events failed (%s); settling each alone", len(batch.events), failure
            )
            loop = asyncio.get_running_loop()
            again: list[_Event | _Result | _Refresh] = [
                _Result(r.change, loop.create_future(), applied=True) for r in batch.results
            ]
            if refreshes or again:
                await self._write([*refreshes, *again], alone=True)
            for event, _, _ in batch.events:
                await self._write([_decided_again(event)], alone=True)

    async def _begin(self, items: list[_Event | _Result | _Refresh]) -> BaseException | None:
        """Shared store: lock and load what ``items`` touch, and refresh it (R11)."""
        assert isinstance(self.store, SharedLedgerStore)
        query_ids: set[str] = set()
        group_ids: set[str] = set()
        for item in items:
            if isinstance(item, _Event) and not item.answer.cancelled():
                query_ids.update([item.query_id] if item.query_id else [])
                group_ids.update([item.group_id] if item.group_id else [])
            elif isinstance(item, _Refresh):
                group_ids.update(item.group_ids)
                query_ids.update(item.query_ids)
            elif isinstance(item, _Result):  # every row a batch writes is under its locks
                group_ids.add(item.change.request.group_id)
        try:
            loaded = await self._in_worker(self.store.begin, query_ids, group_ids)
        except Exception as exc:
            return exc
        stored = loaded.stored
        self.ledger.refresh(loaded.query_ids, loaded.group_ids, stored.queries, stored.groups)
        return None

    def _decide(self, items: list[_Event | _Result | _Refresh]) -> _Batch:
        """Apply every item in arrival order; no await in here, so nothing interleaves."""
        batch = _Batch()
        saved_groups: set[str | None] = set()
        for item in items:
            if isinstance(item, _Refresh):
                continue
            if isinstance(item, _Result):
                if not item.applied:
                    self.ledger.apply_change(item.change)
                batch.results.append(item)
                batch.changes.append(item.change)
                if item.change.request.group_id in saved_groups:
                    batch.undone_by_rollback.append(item)
                continue
            if item.answer.cancelled():
                continue
            try:
                decision = item.decide(self.ledger)
            except Exception as exc:  # a bug in a decision: only its own caller hears
                item.answer.set_exception(exc)
                continue
            savepoint = self.ledger.savepoint(decision)
            saved_groups.add(savepoint.group_id)
            self.ledger.apply(decision)
            batch.events.append((item, decision, savepoint))
            batch.changes.extend(decision.changes)
        return batch

    def _keep(self, batch: _Batch) -> None:
        for event, decision, savepoint in batch.events:
            self.ledger.keep(savepoint)
            if not event.answer.done():
                event.answer.set_result(decision)
        for result in batch.results:
            if not result.recorded.done():
                result.recorded.set_result(None)

    def _roll_back(self, batch: _Batch, failure: BaseException, *, answer: bool = True) -> None:
        """Undo ``batch``'s events in memory; answer them ``failure`` unless ``answer`` is
        False (they are to be written again). Its commit results stand either way."""
        for _, _, savepoint in reversed(batch.events):
            self.ledger.rollback(savepoint)
        # Results stand (Kafka holds them). Those the rollback undid are redone on the
        # restored state, where each one's commit is still the group's commit in flight.
        for result in batch.undone_by_rollback:
            self.ledger.apply_change(result.change)
        for result in batch.results:
            if not result.recorded.done():
                result.recorded.set_result(None)
        if batch.results and answer:
            log.warning(
                "could not record %d commit results (%s); they will be committed again "
                "after a restart",
                len(batch.results),
                failure,
            )
        for event, _, _ in batch.events if answer else ():
            if not event.answer.done():
                event.answer.set_exception(failure)

    async def _in_worker(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, lambda: fn(*args, **kwargs))
