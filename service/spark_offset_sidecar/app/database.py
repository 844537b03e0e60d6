"""The ledger's SQL database (``ports.database``) as the process taking events opens it:
alone, the store built and migrated, the writer child started, the followed folders;
with replicas, the shared store, its followed folders, the leases, the notices of the
other replicas' batches and the status board, all on the store's engine."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from contextlib import AsyncExitStack

from spark_offset_sidecar.adapters.child_process import child_command
from spark_offset_sidecar.adapters.sql.followed_folders import SqlFollowedFolders
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.adapters.sql.writer_process import ProcessWriter
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.database import Opened, Replicas
from spark_offset_sidecar.ports.store import InStoreThread
from spark_offset_sidecar.settings import Settings


class SqlDatabase:
    def __init__(self, settings: Settings, metrics: SidecarMetrics) -> None:
        self.settings, self.metrics = settings, metrics

    @property
    def url(self) -> str:
        return self.settings.database.url

    async def open(self, stack: AsyncExitStack, thread: Executor) -> Opened:
        sql = SqlStore(self.url)
        stack.callback(sql.close)  # also closed with the ledger: idempotent
        await asyncio.to_thread(sql.migrate)
        log = self.settings.log
        command = child_command("writer", log.level, log.format)
        writer = ProcessWriter(sql, command, on_lost=self.metrics.store_writer_lost.inc)
        stack.push_async_callback(writer.close)  # idempotent: closed with the ledger too
        await writer.start()
        return Opened(sql, writer, SqlFollowedFolders(sql.engine))

    async def open_shared(
        self, stack: AsyncExitStack, thread: Executor, replica_id: str
    ) -> tuple[Opened, Replicas]:
        """A replica's batch is one transaction around the ledger's decision: written in
        the store's thread of this process."""
        from spark_offset_sidecar.adapters.sql.change_notices import PostgresChangeNotices
        from spark_offset_sidecar.adapters.sql.lease_store import LeaseStore
        from spark_offset_sidecar.adapters.sql.shared_store import SharedSqlStore
        from spark_offset_sidecar.adapters.sql.status_board import SqlStatusBoard

        metrics = self.metrics
        sql = SharedSqlStore(
            self.url,
            replica_id,
            on_fenced=metrics.commits_fenced.inc,
            on_step=lambda step, seconds: metrics.store_step_cpu.labels(step).inc(seconds),
        )
        stack.callback(sql.close)
        await asyncio.to_thread(sql.migrate)
        opened = Opened(sql, InStoreThread(sql, thread), SqlFollowedFolders(sql.engine))
        leases = LeaseStore(sql.engine, replica_id, self.settings.replicas.lease_seconds)
        notices = PostgresChangeNotices(self.url)
        return opened, Replicas(leases, notices, SqlStatusBoard(sql.engine, replica_id))
