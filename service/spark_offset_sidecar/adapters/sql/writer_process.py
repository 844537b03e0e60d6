"""The ledger's writes in a process of their own: a ``BatchWriter`` (``ports.store``) whose
batches a child process writes with ``SqlStore.persist``, answering over its channel
(``adapters.child_process``). A child has a GIL of its own, so a batch's many short steps
never wait for the event loop (docs/decisions.md, "The writer is a child").

Invariants
  - One write at a time: the durable ledger's writer task is the only caller.
  - A write cut short (cancelled, the child lost) ends the child, so no late reply is
    ever read as another batch's.
  - The child's errors come back as the kinds ``persist`` raises, so the ledger handles a
    batch as it would have in its own thread.
  - A child that ends with a batch unanswered may have committed it or not:
    ``WriteOutcomeUnknown`` carries the batch's rows as read back by the parent, and the
    next write starts a new child (after the supervisor's backoff if it died young).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence

from spark_offset_sidecar.adapters.child_process import (
    Channel,
    ChannelEnd,
    ChildGone,
    Supervisor,
    exit_status,
)
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.adapters.sql.writes import WRITTEN, keys_of
from spark_offset_sidecar.core.ledger.changes import Change
from spark_offset_sidecar.errors import (
    StoreError,
    StoreRefused,
    StoreUnavailable,
    WriteOutcomeUnknown,
)
from spark_offset_sidecar.ports.store import LoadedRows

log = logging.getLogger(__name__)
_KINDS: dict[str, type[StoreError]] = {
    "unavailable": StoreUnavailable,
    "refused": StoreRefused,
    "error": StoreError,
}


class ProcessWriter:
    def __init__(
        self,
        store: SqlStore,
        command: Sequence[str],
        *,
        on_lost: Callable[[], None] = lambda: None,
    ) -> None:
        """``command`` starts the child (``child``'s writer, which runs ``serve``);
        ``on_lost`` is called each time a child ends unasked (a batch or its start
        unanswered)."""
        self.store = store
        self.on_lost = on_lost
        self.supervisor = Supervisor("writer", command, death_signal=signal.SIGKILL)
        self._child: Channel | None = None  # started, database open

    @property
    def started(self) -> int:
        """Children started so far (more than one: some were lost)."""
        return self.supervisor.starts

    @property
    def pid(self) -> int | None:
        return self.supervisor.pid if self._child is not None else None

    async def start(self) -> None:
        """Start the child and wait until it has opened the database; ``StoreUnavailable``
        if it ends first (nothing was sent to be written)."""
        self._child = Channel(await self.supervisor.start())
        try:
            await self._child.ask(self.store.url)
        except ChildGone as exc:
            code = await self._end_child()
            self.on_lost()
            raise StoreUnavailable(
                f"the store's writer process {exit_status(code)} while starting"
            ) from exc
        except BaseException:
            await self._end_child()
            raise

    async def write(self, changes: Sequence[Change]) -> None:
        if not any(type(change) in WRITTEN for change in changes):
            return  # nothing a row holds (a failed commit): as ``persist``
        if self._child is None:
            await self.start()
        assert self._child is not None
        try:
            reply = await self._child.ask(list(changes))
        except ChildGone as exc:
            code = await self._end_child()
            self.on_lost()
            raise WriteOutcomeUnknown(
                f"the store's writer process {exit_status(code)} before answering a "
                f"batch of {len(changes)} changes: written or not, its rows are read again",
                await self._stored_rows(changes),
            ) from exc
        except BaseException:  # cancelled: the reply may still come; never read it
            await self._end_child()
            raise
        if reply is not None:
            kind, message = reply
            raise _KINDS[kind](message)

    async def close(self) -> None:
        self._child = None
        await self.supervisor.stop()

    async def _end_child(self) -> int | None:
        """End the child (killed: a reply it may still send is never read) and return
        its exit code."""
        self._child = None
        return await self.supervisor.kill()

    async def _stored_rows(self, changes: Sequence[Change]) -> LoadedRows | None:
        """The stored rows of the queries and groups ``changes`` touch, or None."""
        names = {key for change in changes if type(change) in WRITTEN for key in keys_of(change)}
        query_ids = {name for kind, name in names if kind == "q"}
        group_ids = {name for kind, name in names if kind == "g"}
        try:
            return await asyncio.to_thread(self.store.rows, query_ids, group_ids)
        except Exception as exc:
            log.error(
                "could not read back the rows of a batch whose write may have happened (%s): "
                "memory may differ from the database for queries %s until a restart",
                exc,
                sorted(query_ids),
            )
            return None


def serve() -> None:
    """The child: the database's URL, then batches of changes, each answered with None
    (written) or ``(kind, message)``; ends when its input closes."""
    channel = ChannelEnd()
    store: SqlStore | None = None
    for number, request in channel.requests():
        reply: tuple[str, str] | None = None
        if store is None:
            store = SqlStore(request)
        else:
            reply = _persisted(store, request)
        channel.reply(number, reply)
    if store is not None:
        store.close()


def _persisted(store: SqlStore, changes: list[Change]) -> tuple[str, str] | None:
    try:
        store.persist(changes)
    except StoreError as exc:  # "error": a constraint broken, the ledger writes each alone
        return next(k for k, kind in _KINDS.items() if isinstance(exc, kind)), str(exc)
    except Exception as exc:  # a bug in a batch's rows: that batch's alone, as in a thread
        log.exception("writing a batch failed")
        return "error", f"{type(exc).__name__}: {exc}"
    return None
