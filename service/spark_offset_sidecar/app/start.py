"""The lifespan's steps: what starts, in which order, and how each part stops.

``Start.run`` opens the ledger's database (``ports.database``), starts the watcher, the
issuer's key refresh, the committers, with replicas the lease keeper (whose first round
claims a share of the groups before the replica answers ready), the commit loop, the
checkpoint follower and the relay of this process's memory to the watcher, and hands back
every part as ``Running``. Each part registers how it stops on the exit stack as it
starts: a failure while starting stops what had started, and shutdown runs in the reverse
order (commits in flight finish within ``shutdown_grace_seconds``, then the leases are
handed back, then Kafka and the database are closed).

Every part is built by the bundles it is handed (``app.parts``): their Kafka clients,
their database; what differs is read from the ``Topology`` alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import generate_latest

from spark_offset_sidecar.adapters.watcher.child import FIRST_READY, PROBLEM
from spark_offset_sidecar.app.watching import cancel, run_in_background
from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.ledger.leases import Ownership
from spark_offset_sidecar.http.state import Running, Runtime
from spark_offset_sidecar.http.watcher_routes import watcher_share
from spark_offset_sidecar.observe.fleet_metrics import MetricsPage, Relayed
from spark_offset_sidecar.observe.loop_lag import LoopLag
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.checkpoints import CheckpointStorage, FollowedFolders
from spark_offset_sidecar.ports.database import Database, Opened, Replicas
from spark_offset_sidecar.ports.group_reports import GroupReports
from spark_offset_sidecar.ports.identity import TokenVerifier
from spark_offset_sidecar.ports.kafka import (
    Cluster,
    GroupCluster,
    KafkaCommitting,
    OffsetCommitter,
)
from spark_offset_sidecar.ports.watcher import Watcher
from spark_offset_sidecar.runtime.checkpoint_follower import REASONS, CheckpointFollower
from spark_offset_sidecar.runtime.commit_loop import CommitLoop
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.runtime.group_reports import (
    FolderReports,
    JobsSeen,
    LocalReports,
    PublishedReports,
)
from spark_offset_sidecar.runtime.identity_keys import keep_keys_fresh
from spark_offset_sidecar.runtime.memory_relay import MemoryRelay
from spark_offset_sidecar.settings import Settings
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
    kafka: KafkaCommitting
    database: Database
    storage: CheckpointStorage
    verifier: TokenVerifier | None
    watcher: Watcher  # started after migrating

    @property
    def metrics(self) -> SidecarMetrics:
        return self.runtime.metrics

    @property
    def clusters(self) -> Clusters:
        return self.runtime.clusters

    async def run(self, stack: AsyncExitStack) -> Running:
        run_in_background(stack, LoopLag(self.metrics.loop_lag.observe).run(), "loop lag")
        wake = asyncio.Event()  # the commit loop's: a batch written frees its groups
        sharing, durable = await self._ledger(stack, wake)
        # The watcher reads the database at the newest migration.
        await self.watcher.start()
        stack.push_async_callback(self.watcher.stop)
        run_in_background(stack, self.watcher.run(), "watcher")
        await self._issuer_keys(stack)
        committer = self.kafka.committer(sharing.replica_id)  # problems: committer_problems
        stack.push_async_callback(committer.close)
        commit_loop = CommitLoop(
            durable,
            committer,
            self.metrics,
            clock=self.runtime.clock,
            ownership=sharing.ownership,
            wake=wake,
        )
        await sharing.keep(stack, self, durable, commit_loop)
        commit_task = self._commits(stack, durable, commit_loop)
        follower = self._follower(sharing.opened.followed, durable)
        self.metrics.watch_resent(self.kafka.resent())
        jobs = JobsSeen(self.settings.status.status_err_after_failures, committer.waiting)
        run_in_background(stack, follower.run(), "checkpoint follower")
        folders, clock = follower.reports, self.runtime.clock
        page = self._metrics_page()
        await self._tell_watcher(
            stack, durable, committer, jobs, folders, sharing.replica_id, page.page.stale
        )
        warn_of_dropped_clusters(durable, self.clusters)
        local = LocalReports(lambda: durable.ledger, jobs, committer.waiting, folders, clock)
        return Running(
            durable,
            commit_loop,
            commit_task,
            jobs,
            reports=sharing.reports(local),
            followed=sharing.opened.followed,
            follower=follower,
            starting_offsets=self.kafka.starting_offsets(group_cluster(durable, self.clusters)),
            page=page,
        )

    def _metrics_page(self) -> MetricsPage:
        """What /metrics answers: this process's series, then the watcher's share (every
        per-group series: it is told this process's memory, ``_tell_watcher``)."""
        metrics = self.settings.metrics
        page = Relayed(
            lambda: generate_latest(self.metrics.registry),
            watcher_share(self.watcher),
            metrics.max_age_seconds,
        )
        return MetricsPage(page, metrics.max_scrapes_per_second)

    async def _tell_watcher(
        self,
        stack: AsyncExitStack,
        durable: DurableLedger,
        committer: OffsetCommitter,
        jobs: JobsSeen,
        folders: FolderReports,
        replica_id: str | None,
        told: Callable[[], None],
    ) -> None:
        """The watcher told what only this process's memory knows, from now on: ready once
        it is (it has loaded the store meanwhile) and told, or after ``FIRST_READY``
        seconds; after that, events are taken whether the watcher answers or not. ``told``
        after each message it took (``/metrics`` is built anew)."""
        watcher = self.watcher
        relay = MemoryRelay(
            durable.ledger,
            watcher,
            waiting=committer.waiting,
            job=jobs.job_of,
            folders=folders,
            problems=lambda: [p for p in self.runtime.problems() if not p.startswith(PROBLEM)],
            owned=lambda: durable.ledger.committing,  # None (every group) but with replicas
            replica=replica_id,  # its watcher publishes as this replica
            told=told,
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
        self, stack: AsyncExitStack, wake: asyncio.Event
    ) -> tuple[Sharing, DurableLedger]:
        """The database opened as the topology says (alone, or one of the replicas) and
        the ledger loaded from its store."""
        commits = self.settings.commits
        thread = ThreadPoolExecutor(1, thread_name_prefix="ledger-store")  # every store call's
        sharing = await self._open(stack, thread)
        opened = sharing.opened
        durable = await DurableLedger.open(
            opened.store,
            thread=thread,
            writer=opened.writer,
            max_pending=commits.max_pending_checkpoints,
            backoff=Backoff(initial=commits.retry_initial_seconds, cap=commits.retry_max_seconds),
            refresh_after=commits.recommit_idle_after_seconds,
            commit_interval=commits.min_commit_interval_seconds,
            on_batch_done=on_batch_done(wake, self.metrics),
        )
        stack.push_async_callback(durable.close)
        return sharing, durable

    async def _open(self, stack: AsyncExitStack, thread: Executor) -> Sharing:
        if not self.topology.replicated:
            return Alone(await self.database.open(stack, thread))
        replica_id = new_replica_id()
        opened, replicas = await self.database.open_shared(stack, thread, replica_id)
        settings = self.settings
        ownership = Ownership(
            replica_id, settings.replicas.lease_seconds, settings.commits.commit_timeout_seconds
        )
        return Replica(opened, replicas, ownership)

    async def _issuer_keys(self, stack: AsyncExitStack) -> None:
        if self.verifier is None:
            return
        await self.verifier.refresh()  # a wrong issuer URL shows on /readyz at once
        refresh = self.settings.oidc.jwks_refresh_seconds
        run_in_background(stack, keep_keys_fresh(self.verifier, refresh, KEYS_RETRY), "issuer keys")

    def _commits(
        self, stack: AsyncExitStack, durable: DurableLedger, commit_loop: CommitLoop
    ) -> asyncio.Task[None]:
        task = asyncio.create_task(commit_loop.run(), name="commit loop")
        stack.push_async_callback(
            stop_commits, commit_loop, task, self.settings.commits.shutdown_grace_seconds
        )
        return task

    def _follower(self, followed: FollowedFolders, durable: DurableLedger) -> CheckpointFollower:
        """The checkpoint follower of the followed folders."""
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
        self.metrics.watch_folders(follower.figures, lambda: self.storage.requests, REASONS)
        return follower


@dataclass(frozen=True)
class Alone:
    """This process alone: it commits every group, reads answered from its memory."""

    opened: Opened
    replica_id: None = None
    ownership: None = None

    async def keep(
        self, stack: AsyncExitStack, start: Start, durable: DurableLedger, commit_loop: CommitLoop
    ) -> None:
        """Every group is this process's."""

    def reports(self, local: GroupReports) -> GroupReports:
        return local


@dataclass(frozen=True)
class Replica:
    """One of the replicas: it commits the groups it holds the leases of (L1-L5), reads
    answered from the board the groups' owners publish on."""

    opened: Opened
    replicas: Replicas
    ownership: Ownership

    @property
    def replica_id(self) -> str:
        return self.ownership.replica_id

    async def keep(
        self, stack: AsyncExitStack, start: Start, durable: DurableLedger, commit_loop: CommitLoop
    ) -> None:
        """The lease keeper, after its first round: a share of the groups held before the
        replica answers ready."""
        from spark_offset_sidecar.runtime.lease_keeper import LeaseKeeper

        settings, metrics, ownership = start.settings, start.metrics, self.ownership
        durable.ledger.commit_only(set())  # L5: nothing until claimed
        metrics.groups_owned.set_function(lambda: len(ownership.epochs))
        read_back = start.kafka.committed_reader(group_cluster(durable, start.clusters))
        if read_back is not None:
            stack.push_async_callback(read_back.close)
        keeper = LeaseKeeper(
            self.replicas.leases,
            self.replicas.notices,
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

    def reports(self, local: GroupReports) -> GroupReports:
        return PublishedReports(self.replicas.board)


# What differs between a process alone and one of the replicas, decided once from the
# topology (``Start._open``). Not a null ``Replicas`` (leases owning every group): alone,
# no replica id goes to Kafka and no group waits to be claimed.
Sharing = Alone | Replica


def group_cluster(durable: DurableLedger, clusters: Clusters) -> GroupCluster:
    """The cluster of a group's commits: as the ledger stores it, else as the settings
    choose for it."""

    def cluster(group_id: str) -> Cluster:
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
