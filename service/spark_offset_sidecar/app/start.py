"""The lifespan's steps: what starts, in which order, and how each part stops.

``Start.run`` opens the ledger (migrating the SQL store it built), starts the issuer's key
refresh, the committers, with replicas the lease keeper (whose first round claims a share
of the groups before the replica answers ready), the commit loop, the lag monitors and the
checkpoint follower, and hands back every part as ``Running``. Each part registers how it
stops on the exit stack as it starts: a failure while starting stops what had started, and
shutdown runs in the reverse order (commits in flight finish within
``shutdown_grace_seconds``, then the leases are handed back, then Kafka and the database
are closed).

What is built here is known by its type, never tested for it: the SQL store built here
(None when one was given), the Kafka clients built here (none of a kind that was given).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import generate_latest

from spark_offset_sidecar.adapters.child_process import child_command
from spark_offset_sidecar.adapters.kafka.committer import KafkaOffsetCommitter
from spark_offset_sidecar.adapters.sql.followed_folders import SqlFollowedFolders
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.adapters.sql.writer_process import ProcessWriter
from spark_offset_sidecar.adapters.watcher.child import FIRST_READY, PROBLEM, WatcherChild
from spark_offset_sidecar.app.kafka_clients import GroupCluster, Key
from spark_offset_sidecar.app.kafka_commits import CommittingClients
from spark_offset_sidecar.app.parts import Parts
from spark_offset_sidecar.app.shared import fleet_options
from spark_offset_sidecar.app.watching import Watched, cancel, run_in_background, watch_lag
from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.ledger.leases import Ownership
from spark_offset_sidecar.http.state import Running, Runtime
from spark_offset_sidecar.http.watcher_routes import watcher_share
from spark_offset_sidecar.observe.fleet_metrics import (
    ALL_SERIES,
    MEMORY_SERIES,
    FleetExposition,
    MetricsPage,
)
from spark_offset_sidecar.observe.loop_lag import LoopLag
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.checkpoints import CheckpointStorage, FollowedFolders
from spark_offset_sidecar.ports.identity import TokenVerifier
from spark_offset_sidecar.ports.kafka import (
    OffsetCommitter,
    StartingOffsetsReader,
)
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.store import BatchWriter, LedgerStore
from spark_offset_sidecar.runtime.checkpoint_follower import REASONS, CheckpointFollower
from spark_offset_sidecar.runtime.commit_loop import CommitLoop
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.runtime.group_reports import LocalReports, PublishedReports
from spark_offset_sidecar.runtime.identity_keys import keep_keys_fresh
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.runtime.lag_monitors import LagMonitors
from spark_offset_sidecar.runtime.memory_relay import MemoryRelay
from spark_offset_sidecar.settings import DatabaseSettings, Settings
from spark_offset_sidecar.topology import Topology

if TYPE_CHECKING:  # replicas' modules need the postgres extra: imported when replicated
    from spark_offset_sidecar.runtime.lease_keeper import LeaseKeeper

log = logging.getLogger(__name__)

KEYS_RETRY = 10.0  # seconds between fetches of the issuer's keys while they fail


@dataclass
class Start:
    """Everything the steps share; ``run`` once per lifespan."""

    settings: Settings
    topology: Topology
    runtime: Runtime
    kafka: CommittingClients
    parts: Parts
    storage: CheckpointStorage
    verifier: TokenVerifier | None
    watcher: WatcherChild | None = None  # the watcher as a child: started after migrating

    @property
    def metrics(self) -> SidecarMetrics:
        return self.runtime.metrics

    @property
    def clusters(self) -> Clusters:
        return self.kafka.clusters

    async def run(self, stack: AsyncExitStack) -> Running:
        replica_id = new_replica_id() if self.topology.replicated else None
        run_in_background(stack, LoopLag(self.metrics.loop_lag.observe).run(), "loop lag")
        wake = asyncio.Event()  # the commit loop's: a batch written frees its groups
        sql, durable = await self._ledger(stack, replica_id, wake)
        if self.watcher is not None:  # it reads the database at the newest migration
            await self.watcher.start()
            stack.push_async_callback(self.watcher.stop)
            run_in_background(stack, self.watcher.run(), "watcher")
        await self._issuer_keys(stack)
        built, committer = self._committers(stack, replica_id)
        ownership = self._ownership(durable, replica_id)
        commit_loop = CommitLoop(
            durable,
            committer,
            self.metrics,
            clock=self.runtime.clock,
            ownership=ownership,
            wake=wake,
        )
        board = self.parts.status_board
        if ownership is not None and sql is not None:
            board = await self._replicas(stack, sql, ownership, durable, commit_loop, board)
        commit_task = self._commits(stack, durable, commit_loop)
        lag_monitor = self._lag_monitors(stack, durable, board, committer, built)
        if self.watcher is None:  # else the watcher reads the log ends
            run_in_background(stack, lag_monitor.run(), "lag monitor")
        followed = self.parts.followed_folders or (
            SqlFollowedFolders(sql.engine) if sql is not None else None
        )
        follower = self._follower(stack, followed, durable, lag_monitor)
        if self.watcher is not None:
            await self._tell_watcher(
                stack, self.watcher, durable, committer, lag_monitor, follower, replica_id
            )
        warn_of_dropped_clusters(durable, self.clusters)
        reports = (
            PublishedReports(board)
            if board is not None
            else LocalReports(
                lambda: durable.ledger,
                lag_monitor,
                committer.waiting,
                follower.reports if follower is not None else None,
                self.runtime.clock,
            )
        )
        return Running(
            durable,
            commit_loop,
            commit_task,
            lag_monitor,
            reports=reports,
            followed=followed,
            follower=follower,
            starting_offsets=self._starting_offsets(durable),
            page=self._metrics_page(durable, lag_monitor),
        )

    def _starting_offsets(self, durable: DurableLedger) -> StartingOffsetsReader:
        """Reads a group's commits from Kafka (a client a call: nothing held between)."""
        if self.parts.starting_offsets is not None:
            return self.parts.starting_offsets
        return self.kafka.starting_offsets(group_cluster(durable, self.clusters))

    def _metrics_page(
        self, durable: DurableLedger, lag_monitor: LagMonitor | LagMonitors
    ) -> MetricsPage:
        """What /metrics answers: this process's series, then every group's (those of its
        memory only where the watcher is a child, and the child's share after them)."""
        settings, watcher = self.settings, self.watcher
        fleet = FleetExposition(
            lambda: durable.ledger,
            lambda: lag_monitor,
            fleet_options(settings.metrics, self.kafka, MEMORY_SERIES if watcher else ALL_SERIES),
            self.runtime.clock,
            head=lambda: generate_latest(self.metrics.registry),
            tail=watcher_share(watcher) if watcher is not None else None,
        )
        return MetricsPage(fleet, settings.metrics.max_scrapes_per_second)

    async def _tell_watcher(
        self,
        stack: AsyncExitStack,
        watcher: WatcherChild,
        durable: DurableLedger,
        committer: OffsetCommitter,
        lag_monitor: LagMonitor | LagMonitors,
        follower: CheckpointFollower | None,
        replica_id: str | None,
    ) -> None:
        """The watcher told what only this process's memory knows, from now on: ready once
        it is (it has loaded the store meanwhile) and told, or after ``FIRST_READY``
        seconds; after that, events are taken whether the watcher answers or not."""
        relay = MemoryRelay(
            durable.ledger,
            watcher,
            waiting=committer.waiting,
            job=lag_monitor.job_of,
            folders=follower.reports if follower is not None else None,
            problems=lambda: [p for p in self.runtime.problems() if not p.startswith(PROBLEM)],
            owned=lambda: durable.ledger.committing,  # None (every group) but with replicas
            replica=replica_id,  # its watcher publishes as this replica
        )
        try:
            async with asyncio.timeout(FIRST_READY):
                ready = await watcher.first_ready()
        except TimeoutError:
            ready = False
        if ready:
            await relay.tell()
        else:
            log.warning("the watcher is not ready yet: readers get 503 until it is")
        run_in_background(stack, relay.run(), "memory relay")

    async def _ledger(
        self, stack: AsyncExitStack, replica_id: str | None, wake: asyncio.Event
    ) -> tuple[SqlStore | None, DurableLedger]:
        """The store (the SQL one built and migrated here, unless one was given) and the
        ledger loaded from it."""
        commits = self.settings.commits
        sql: SqlStore | None = None
        store: LedgerStore
        writer: BatchWriter | None = None
        if self.parts.store is None:
            sql = store = sql_store(self.settings.database, replica_id, self.metrics)
            stack.callback(sql.close)  # also closed with the ledger: idempotent
            await asyncio.to_thread(sql.migrate)
            if self.topology.writer == "child":
                writer = await self._writer_process(stack, sql)
        else:
            store = self.parts.store
        durable = await DurableLedger.open(
            store,
            max_pending=commits.max_pending_checkpoints,
            backoff=Backoff(initial=commits.retry_initial_seconds, cap=commits.retry_max_seconds),
            refresh_after=commits.recommit_idle_after_seconds,
            commit_interval=commits.min_commit_interval_seconds,
            writer=writer,
            on_batch_done=on_batch_done(wake, self.metrics),
        )
        stack.push_async_callback(durable.close)
        return sql, durable

    async def _writer_process(self, stack: AsyncExitStack, sql: SqlStore) -> BatchWriter:
        """The batches' writer process, started (closed with the ledger, or here if the
        start fails after it)."""
        writer = ProcessWriter(
            sql,
            child_command("writer", self.settings.log.level, self.settings.log.format),
            on_lost=self.metrics.store_writer_lost.inc,
        )
        stack.push_async_callback(writer.close)  # idempotent
        await writer.start()
        return writer

    async def _issuer_keys(self, stack: AsyncExitStack) -> None:
        if self.verifier is None:
            return
        await self.verifier.refresh()  # a wrong issuer URL shows on /readyz at once
        refresh = self.settings.oidc.jwks_refresh_seconds
        run_in_background(stack, keep_keys_fresh(self.verifier, refresh, KEYS_RETRY), "issuer keys")

    def _committers(
        self, stack: AsyncExitStack, replica_id: str | None
    ) -> tuple[dict[Key, KafkaOffsetCommitter], OffsetCommitter]:
        """The Kafka committers built here (none when one was given), and the committer
        the commit loop sees."""
        if self.parts.committer is not None:
            stack.push_async_callback(self.parts.committer.close)
            return {}, self.parts.committer
        built = self.kafka.committers(replica_id)  # their problems: ``kafka.committer_problems``
        committer = self.kafka.committer(built)
        stack.push_async_callback(committer.close)
        return built, committer

    def _ownership(self, durable: DurableLedger, replica_id: str | None) -> Ownership | None:
        if replica_id is None:
            return None
        settings = self.settings
        ownership = Ownership(
            replica_id, settings.replicas.lease_seconds, settings.commits.commit_timeout_seconds
        )
        durable.ledger.commit_only(set())  # L5: nothing until claimed
        self.metrics.groups_owned.set_function(lambda: len(ownership.epochs))
        return ownership

    async def _replicas(
        self,
        stack: AsyncExitStack,
        sql: SqlStore,
        ownership: Ownership,
        durable: DurableLedger,
        commit_loop: CommitLoop,
        board: StatusBoard | None,
    ) -> StatusBoard:
        """The lease keeper, after its first round (a share of the groups held before the
        replica answers ready), and the board of reports every replica reads."""
        from spark_offset_sidecar.adapters.sql.change_notices import PostgresChangeNotices
        from spark_offset_sidecar.adapters.sql.lease_store import LeaseStore
        from spark_offset_sidecar.adapters.sql.status_board import SqlStatusBoard
        from spark_offset_sidecar.runtime.lease_keeper import LeaseKeeper

        settings, metrics = self.settings, self.metrics
        # A double committer never wrote to Kafka: nothing there to read back.
        read_back = self.parts.committed_reader
        if read_back is None and self.parts.committer is None:
            read_back = self.kafka.committed_reader(group_cluster(durable, self.clusters))
            stack.push_async_callback(read_back.close)
        keeper = LeaseKeeper(
            LeaseStore(sql.engine, ownership.replica_id, settings.replicas.lease_seconds),
            PostgresChangeNotices(settings.database.url),
            ownership,
            durable,
            on_owned=commit_loop.wake,
            read_back=read_back,
            read_back_after=settings.commits.commit_timeout_seconds,
            on_mismatch=lambda _group: metrics.takeover_mismatches.inc(),
        )
        # Leases are handed back after the commit loop stopped (registered before it).
        stack.push_async_callback(leave, keeper, commit_loop)
        await keeper.round()
        run_in_background(stack, keeper.run(), "lease keeper")
        run_in_background(stack, keeper.listen(), "notices")
        return board if board is not None else SqlStatusBoard(sql.engine, ownership.replica_id)

    def _commits(
        self, stack: AsyncExitStack, durable: DurableLedger, commit_loop: CommitLoop
    ) -> asyncio.Task[None]:
        task = asyncio.create_task(commit_loop.run(), name="commit loop")
        stack.push_async_callback(
            stop_commits, commit_loop, task, self.settings.commits.shutdown_grace_seconds
        )
        return task

    def _lag_monitors(
        self,
        stack: AsyncExitStack,
        durable: DurableLedger,
        board: StatusBoard | None,
        committer: OffsetCommitter,
        committers: dict[Key, KafkaOffsetCommitter],
    ) -> LagMonitor | LagMonitors:
        return watch_lag(
            stack,
            Watched(self.settings, self.kafka, self.metrics, self.runtime.clock),
            lambda: durable.ledger,
            given=self.parts,
            board=board,
            waits=committer.waiting,
            committers=committers,
            reads_exported=self.watcher is None,
        )

    def _follower(
        self,
        stack: AsyncExitStack,
        followed: FollowedFolders | None,
        durable: DurableLedger,
        lag_monitor: LagMonitor | LagMonitors,
    ) -> CheckpointFollower | None:
        if followed is None:
            return None
        follow = self.settings.follow
        follower = CheckpointFollower(
            self.storage,
            followed,
            durable,
            interval=follow.interval_seconds,
            relist_every=follow.relist_every,
            read_timeout=follow.read_timeout_seconds,
            clock=self.runtime.clock,
            clusters=self.clusters,
        )
        lag_monitor.set_folders(follower.reports)  # published with the groups
        self.metrics.watch_folders(follower.figures, lambda: self.storage.requests, REASONS)
        run_in_background(stack, follower.run(), "checkpoint follower")
        return follower


def group_cluster(durable: DurableLedger, clusters: Clusters) -> GroupCluster:
    """The cluster of a group's commits: as the ledger stores it, else as the settings
    choose for it."""

    def cluster(group_id: str) -> Key:
        group = durable.ledger.groups.get(group_id)
        return group.cluster if group is not None else clusters.of(group_id).name

    return cluster


def warn_of_dropped_clusters(durable: DurableLedger, clusters: Clusters) -> None:
    """Groups stored on a cluster the settings no longer name cannot commit (R14): say so
    once, at start, naming the clusters."""
    dropped = Counter(
        g.cluster
        for g in durable.ledger.groups.values()
        if g.cluster is not None and g.cluster not in clusters.others
    )
    if dropped:
        log.warning(
            "groups on Kafka clusters the settings do not name: %s; their commits fail "
            "until SIDECAR_KAFKA_CLUSTERS names them again",
            ", ".join(f"{name!r} ({count} groups)" for name, count in sorted(dropped.items())),
        )


def new_replica_id() -> str:
    """Unique per process start: a restarted pod is a new owner (its memory is new)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def sql_store(
    database: DatabaseSettings, replica_id: str | None, metrics: SidecarMetrics
) -> SqlStore:
    if replica_id is None:
        return SqlStore(database.url)
    from spark_offset_sidecar.adapters.sql.shared_store import SharedSqlStore

    return SharedSqlStore(
        database.url,
        replica_id,
        on_fenced=metrics.commits_fenced.inc,
        on_step=lambda step, seconds: metrics.store_step_cpu.labels(step).inc(seconds),
    )


async def leave(keeper: LeaseKeeper, loop: CommitLoop) -> None:
    """Hand back the leases: cleanly when no commit was cut short by the stop."""
    try:
        await keeper.leave(clean=loop.cancelled == 0)
    except Exception as exc:  # the leases expire on their own
        log.warning("could not hand back leases: %s", exc)


async def stop_commits(loop: CommitLoop, task: asyncio.Task[None], grace: float) -> None:
    """Let commits in flight finish (within ``grace``), then end the loop."""
    await loop.stop(grace)
    await cancel(task)


def on_batch_done(wake: asyncio.Event, metrics: SidecarMetrics) -> Callable[[int, float], None]:
    def done(items: int, seconds: float) -> None:
        metrics.store_batch_items.observe(items)
        metrics.store_write_duration.observe(seconds)
        wake.set()  # the commit loop's: the batch's groups are no longer held

    return done
