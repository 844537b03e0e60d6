"""The ledger's database as the process taking events opens it, once a lifespan: its
store, the writer of its batches, its followed folders, the board the reports are
published on and, with replicas, the leases and the notices of the other replicas'
batches. The SQL one is ``app.database``; ``testing.MemoryDatabase`` its double."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Protocol

from spark_offset_sidecar.ports.checkpoints import FollowedFolders
from spark_offset_sidecar.ports.leases import ChangeNotices, Leases
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.store import BatchWriter, LedgerStore


@dataclass(frozen=True)
class Replicas:
    leases: Leases
    notices: ChangeNotices


@dataclass(frozen=True)
class Opened:
    store: LedgerStore
    writer: BatchWriter | None = None  # the writer child; None: batches written in a thread
    followed: FollowedFolders | None = None  # None: the store keeps none (a double)
    board: StatusBoard | None = None  # where the reports are published; None: in memory
    replicas: Replicas | None = None  # with replicas (the topology) alone


class Database(Protocol):
    @property
    def url(self) -> str | None:
        """The SQL URL (the topology names its scheme); None: a store double."""

    async def open(
        self, stack: AsyncExitStack, replica_id: str | None, writer_child: bool
    ) -> Opened:
        """Opened (the SQL store migrated, the writer child started when ``writer_child``),
        each part closed with ``stack``; ``replica_id``: this replica's, with replicas."""
