"""The ledger's database as the process taking events opens it, once a lifespan: alone,
its store, the writer of its batches and its followed folders; with replicas, those on the
shared store and what the replicas share beside it: the leases, the notices of the other
replicas' batches and the board the reports are published on. The SQL one is
``app.database``; ``testing.MemoryDatabase`` its double."""

from __future__ import annotations

from concurrent.futures import Executor
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Protocol

from spark_offset_sidecar.ports.checkpoints import FollowedFolders
from spark_offset_sidecar.ports.leases import ChangeNotices, Leases
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.store import BatchWriter, LedgerStore


@dataclass(frozen=True)
class Opened:
    store: LedgerStore
    writer: BatchWriter  # the writer child, or the store in its thread (``InStoreThread``)
    followed: FollowedFolders


@dataclass(frozen=True)
class Replicas:
    leases: Leases
    notices: ChangeNotices
    board: StatusBoard  # where the groups' owners publish their reports


class Database(Protocol):
    @property
    def url(self) -> str | None:
        """The SQL URL (the topology names its scheme); None: a store double."""

    async def open(self, stack: AsyncExitStack, thread: Executor) -> Opened:
        """Opened alone (the SQL store migrated, the writer child started), each part
        closed with ``stack``; ``thread``: the one every call to the store runs in."""

    async def open_shared(
        self, stack: AsyncExitStack, thread: Executor, replica_id: str
    ) -> tuple[Opened, Replicas]:
        """Opened as the replica ``replica_id`` (the shared store, its batches written in
        ``thread``) and what the replicas share."""
