"""Where the ledger's accepted state is kept across restarts.

``LedgerStore`` is the port; ``SqlStore`` (``adapters.sql.store``) is the real one,
``testing.InMemoryStore`` keeps nothing beyond the process (unit tests of the core).

Contract
  - ``persist(changes)`` writes all of ``changes`` in one transaction or none of them, and
    raises ``StoreUnavailable`` when it cannot (the caller answers 503; memory unchanged).
  - ``load()`` returns what a new ledger starts from: every query with its pending
    checkpoints and last completed id, every group with its slot (anything completed and
    not known to be committed -- a commit that was in flight at a crash is redone, which
    is harmless: commits of the same offsets are idempotent), committed offsets, rewind
    permission. The store may lag Kafka in what is committed, never in what is accepted.
  - Methods are blocking; the application calls them from one worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Hashable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from spark_offset_sidecar.core.ledger.changes import Change
from spark_offset_sidecar.core.ledger.rules import GroupState, QueryState


@dataclass
class StoredState:
    queries: list[QueryState] = field(default_factory=list)
    groups: list[GroupState] = field(default_factory=list)


@dataclass(frozen=True)
class LoadedRows:
    """Stored rows of some queries and groups: every id asked for or reached through its
    partner (one absent from ``stored`` has no row)."""

    query_ids: frozenset[str]
    group_ids: frozenset[str]
    stored: StoredState


class LedgerStore(Protocol):
    def load(self) -> StoredState: ...

    def persist(self, changes: Sequence[Change]) -> None: ...

    def check(self) -> None:
        """Raise ``StoreUnavailable`` unless the store is reachable and its schema current."""

    def close(self) -> None: ...


class BatchWriter(Protocol):
    """Where the durable ledger's batches are written when not in its own store thread
    (``adapters.sql.writer_process``: a child process with a GIL of its own).

    ``write(changes)`` is ``persist(changes)`` awaited: one transaction or none, the same
    errors; and ``WriteOutcomeUnknown`` (a ``StoreUnavailable``) when the writer was lost
    before it answered, carrying the batch's rows as they are stored now. One write at a
    time."""

    async def write(self, changes: Sequence[Change]) -> None: ...

    async def close(self) -> None: ...


class InStoreThread:
    """The ``BatchWriter`` without a writer child: the store persists each batch in
    ``thread``, the one every call to the store runs in."""

    def __init__(self, store: LedgerStore, thread: Executor) -> None:
        self.store, self.thread = store, thread

    async def write(self, changes: Sequence[Change]) -> None:
        await asyncio.get_running_loop().run_in_executor(self.thread, self.store.persist, changes)

    async def close(self) -> None:
        """Nothing of its own: the store is closed with the ledger."""


@runtime_checkable
class SharedLedgerStore(LedgerStore, Protocol):
    """A store that several replicas share (``adapters.sql.shared_store``): each batch is
    ``begin`` (lock and load what it touches), decisions, then ``persist`` or ``abort``."""

    def begin(self, query_ids: Collection[str], group_ids: Collection[str]) -> LoadedRows: ...

    def abort(self) -> None: ...

    def snapshot(self) -> StoredState:
        """Every stored query and group as one consistent snapshot, whichever replica
        wrote them, outside any batch and taking no lock (for reads); callable from any
        thread."""


@dataclass(frozen=True)
class StoredMarks:
    """A small fingerprint of every stored query and group: a mark changes whenever what a
    ledger loads of its row changes (values of the rows, not a clock: nothing to keep in
    step between processes). A reader that compares two sets of marks knows which rows
    to read again, and which are gone."""

    queries: Mapping[str, tuple[str, Hashable]]  # query id: (its group's id, its mark)
    groups: Mapping[str, Hashable]


class LedgerRows(Protocol):
    """Reads of the store for a process that follows the ledger without taking events (the
    watcher: ``runtime.store_follower``). Blocking; callable from any one thread."""

    def marks(self) -> StoredMarks: ...

    def check(self) -> None:
        """Raise ``StoreUnavailable`` unless the store is reachable and its schema current."""

    def rows(self, query_ids: Collection[str], group_ids: Collection[str]) -> LoadedRows:
        """The rows of ``query_ids``, of ``group_ids`` and of their partners (a group's
        query, a query's group), as ``load`` would return them."""
