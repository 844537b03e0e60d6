"""A durable ledger built as ``DurableLedger.open`` builds one, for tests that start it
from a ledger of their own: the store's one thread, its batches written by the store in
that thread unless a writer is given."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.ports.store import BatchWriter, InStoreThread, LedgerStore
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger


def durable_ledger(
    ledger: Ledger,
    store: LedgerStore,
    *,
    writer: BatchWriter | None = None,
    on_batch_done: Callable[[int, float], None] = lambda items, seconds: None,
) -> DurableLedger:
    thread = ThreadPoolExecutor(1, thread_name_prefix="ledger-store")
    return DurableLedger(
        ledger,
        store,
        thread,
        writer=writer or InStoreThread(store, thread),
        on_batch_done=on_batch_done,
    )
