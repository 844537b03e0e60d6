"""The watcher, built by ``create_watch_app(settings, topology)``: the service's child
process (``topology``) that watches the fleet, so that taking events is the only thing on
the event loop of the process that takes them.

It takes no events and commits nothing. Its ledger follows the database the service
writes (``runtime.store_follower``), its lag monitor reads the log ends and evaluates
every group, and it answers what readers read, through its service's port:
``/v1/status``, ``/v1/status/{group}``, ``/ui``, and its share of ``/metrics`` (the
per-group series of the database and of the evaluation; the service exports its memory's:
``observe.fleet_metrics``). Its service's settings and topology, as its service hands
them (``app.watcher_brief``); it answers its service's requests on its channel
(``adapters.watcher.answering``), not on a port.

Its lifespan checks the schema (the service migrates; a watcher never does), loads the
whole ledger (the follower's first step) before it answers ready, then follows the
database and reads the log ends every ``lag_read_interval_seconds``. A failure while
starting stops what had started (the exit stack).

What the database does not hold (the memory of the process taking events: the counters,
a commit in flight and what it waits for, consecutive failures, the jobs' rates from
their progress events, how reading a followed folder goes) it is told by its service
(``MEMORY_UPDATES`` on its channel; ``runtime.watcher_memory``), and reads as that process would.

A replica's watcher (``SIDECAR_REPLICATED=true``) watches that replica's share of the
fleet: it is told which replica it watches for and which groups that replica holds the
leases of, evaluates those only, publishes their reports as that replica on the status
board every replica reads, and answers readers from the board.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

from fastapi import FastAPI, Request, status
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from spark_offset_sidecar.adapters.sql.followed_folders import SqlFollowedFolders
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.adapters.watcher.memory_update import (
    MemoryUpdateRefused,
    decode_memory_update,
)
from spark_offset_sidecar.app.shared import (
    add_operational_routes,
    fleet_options,
    new_metrics,
    new_runtime,
    token_verifier,
)
from spark_offset_sidecar.app.watching import run_in_background
from spark_offset_sidecar.core.lag.report import FolderReport
from spark_offset_sidecar.core.lag.status import CommitWindows
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.http.refusals import exception_answers
from spark_offset_sidecar.http.state import Watching
from spark_offset_sidecar.http.status_page import router as status_page_router
from spark_offset_sidecar.http.status_routes import router as status_router
from spark_offset_sidecar.observe.fleet_metrics import WATCHER_SERIES, FleetExposition, MetricsPage
from spark_offset_sidecar.observe.loop_lag import LoopLag
from spark_offset_sidecar.observe.metrics import SidecarMetrics, package_version
from spark_offset_sidecar.ports.group_reports import GroupReports
from spark_offset_sidecar.ports.kafka import KafkaReading
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.watcher import MEMORY_UPDATES, WATCHED_METRICS
from spark_offset_sidecar.runtime.group_reports import LocalReports, PublishedReports
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.runtime.lag_monitors import LagMonitors
from spark_offset_sidecar.runtime.store_follower import StoreFollower
from spark_offset_sidecar.runtime.watcher_memory import WatcherMemory
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.topology import Topology

log = logging.getLogger(__name__)

NO_REPLICA_YET = ""  # a replica's watcher's board before it is told which replica: owns nothing


def create_watch_app(
    settings: Settings,
    topology: Topology,
    kafka: KafkaReading,
    clock: Callable[[], float] = time.time,
    board: StatusBoard | None = None,
) -> FastAPI:
    """Build the watcher of a service that runs as ``topology`` says (its own, resolved by
    the service), on the SQL database of ``settings`` and the Kafka clients ``kafka``
    (``app.kafka_clients``; tests hand in ``testing.MemoryKafka``); ``board``: where it
    publishes its reports and reads them back (a test's double; else, with replicas, the
    database's)."""
    metrics = new_metrics(settings)
    verifier = token_verifier(settings.oidc)
    start = WatchStart(settings, topology, kafka, metrics, clock, board=board)
    runtime = new_runtime(
        settings, metrics, clock, kafka, verifier, topology, service_problems=start.problems
    )
    ledger = start.ledger

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.callback(log.info, "stopped")
            runtime.life.started = await start.run(stack)
            runtime.life.ready = True
            log.info(
                "watching: %d queries, %d groups loaded from the database",
                len(ledger.queries),
                len(ledger.groups),
            )
            try:
                yield
            finally:
                runtime.life.ready = False

    app = FastAPI(
        title="spark-offset-sidecar watcher",
        version=package_version(),
        description="Watches the fleet of a spark-offset-sidecar: lag, status and the "
        "status page of every group, from the database the service writes.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    answers = exception_answers(metrics)
    app.include_router(status_router)
    app.include_router(status_page_router)
    for exception, answer in answers.items():
        app.add_exception_handler(exception, answer)
    add_operational_routes(app, runtime)

    @app.get(WATCHED_METRICS, include_in_schema=False, response_class=PlainTextResponse)
    async def watched_metrics(request: Request) -> Response:
        """Its share of its service's /metrics (gzip when asked: the service passes it on
        as it is)."""
        text, packed = await start.share.rendered()
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(
                packed, media_type=CONTENT_TYPE_LATEST, headers={"content-encoding": "gzip"}
            )
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    @app.post(MEMORY_UPDATES, include_in_schema=False, status_code=status.HTTP_204_NO_CONTENT)
    async def take_memory_update(request: Request) -> Response:
        """What its service knows of the groups (its channel only: no port serves this app)."""
        memory = start.memory
        if memory is None:
            return PlainTextResponse("the watcher is starting\n", status_code=503)
        try:
            message = decode_memory_update(await request.body())
        except MemoryUpdateRefused as exc:
            return PlainTextResponse(f"{exc}\n", status_code=400)
        if not memory.takes(message):
            return PlainTextResponse(
                "this watcher was told nothing whole yet: tell it everything\n", status_code=409
            )
        memory.take(message)
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    return app


@dataclass
class WatchStart:
    """The watcher's lifespan's steps; ``run`` once per lifespan."""

    settings: Settings
    topology: Topology
    kafka: KafkaReading
    metrics: SidecarMetrics
    clock: Callable[[], float]
    ledger: Ledger = field(default_factory=Ledger)
    memory: WatcherMemory | None = None  # what it was told, once ``run`` built it
    board: StatusBoard | None = None  # handed in, or a replica's once ``run`` built it
    monitor: LagMonitor | LagMonitors | None = None  # once ``run`` built it
    # Its share of its service's /metrics: the lag reads and the per-group series, none
    # of the process-wide ones the service exports too.
    share_registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    share: FleetExposition = field(init=False)

    def __post_init__(self) -> None:
        self.share = self._fleet(self.share_registry)

    @property
    def replicated(self) -> bool:
        return self.topology.replicated

    def _fleet(self, registry: CollectorRegistry) -> FleetExposition:
        return FleetExposition(
            lambda: self.ledger,
            lambda: self.monitor,
            fleet_options(self.settings, WATCHER_SERIES),
            self.clock,
            head=lambda: generate_latest(registry),
        )

    def _publish_as(self, replica_id: str) -> None:
        """The replica it watches for, as told (another when that replica started again)."""
        if self.board is not None and self.board.replica_id != replica_id:
            log.info("watching for replica %s", replica_id)
            self.board.replica_id = replica_id

    def problems(self) -> Sequence[str]:
        """The identity problems its service told it."""
        return self.memory.problems if self.memory is not None else ()

    def _waiting(self, group_id: str) -> str | None:
        return self.memory.waiting(group_id) if self.memory is not None else None

    def _refreshed(self, group_ids: Collection[str]) -> None:
        if self.memory is not None:
            self.memory.refreshed(group_ids)

    def _wanted(self) -> frozenset[str] | None:
        """A replica's watcher holds its replica's groups only (none before told)."""
        if not self.replicated:
            return None
        return self.memory.wanted() if self.memory is not None else frozenset()

    def _lag_monitors(
        self, stack: AsyncExitStack, folders: Callable[[], Mapping[str, tuple[FolderReport, ...]]]
    ) -> LagMonitor | LagMonitors:
        """One lag monitor per cluster (a topic of one name on two clusters is two topics),
        on its log-end and record-time readers, its reads exported on both ``/metrics``;
        ``folders``: how reading each group's followed folders goes (published with its
        report). A group's commit in flight waits for what its service told."""
        status, kafka = self.settings.status, self.kafka
        readers, times = kafka.log_ends(), kafka.record_times()
        for reader in readers.values():
            stack.push_async_callback(reader.close)
        for time_reader in times.values():
            stack.push_async_callback(time_reader.close)
        self.metrics.watch_resent(kafka.resent())
        monitors = {
            key: LagMonitor(
                lambda: self.ledger,
                reader,
                interval=status.lag_read_interval_seconds,
                err_after_failures=status.status_err_after_failures,
                windows=CommitWindows(status.status_window, status.status_stop_after_seconds),
                clock=self.clock,
                board=self.board,
                record_times=times.get(key),
                risk_seconds=status.retention_risk_seconds,
                waits=self._waiting,
                one_cluster=len(readers) > 1,
                cluster=key,
                folders=folders,
            )
            for key, reader in readers.items()
        }
        self.metrics.watch_lag(monitors, also=self.share_registry)
        return LagMonitors(monitors) if len(monitors) > 1 else monitors[None]

    async def run(self, stack: AsyncExitStack) -> Watching:
        settings, metrics, ledger = self.settings, self.metrics, self.ledger
        run_in_background(stack, LoopLag(metrics.loop_lag.observe).run(), "loop lag")
        sql = SqlStore(settings.database.url)
        stack.callback(sql.close)
        followed = SqlFollowedFolders(sql.engine)
        if self.replicated and self.board is None:
            from spark_offset_sidecar.adapters.sql.status_board import SqlStatusBoard

            self.board = SqlStatusBoard(sql.engine, NO_REPLICA_YET)
        board = self.board
        if self.replicated:
            ledger.commit_only(set())  # L5: nothing of the replica's until told its groups
        memory: WatcherMemory  # built below, on the lag monitor: read once running
        lag_monitor = self.monitor = self._lag_monitors(stack, lambda: memory.folder_reports())
        follower = StoreFollower(
            sql,
            ledger,
            interval=settings.status.lag_read_interval_seconds,
            refreshed=self._refreshed,
            wanted=self._wanted,
        )
        # A group told of but not read yet: the database now, not in a while.
        memory = self.memory = WatcherMemory(
            ledger,
            lag_monitor.note_job,
            follower.wake,
            watch_more=lag_monitor.wake,
            publish_as=self._publish_as,
            follows_owned=self.replicated,
        )
        stack.callback(follower.close)
        try:  # a watcher reads columns of the newest schema
            await asyncio.to_thread(sql.check)
        except StoreUnavailable as exc:
            raise StoreUnavailable(
                f"{exc}; a watcher never migrates: its service (offset-sidecar serve) "
                "migrates before starting it"
            ) from exc
        await follower.step()  # the whole ledger, before answering ready
        follow_task = run_in_background(stack, follower.run(), "store follower")
        lag_task = run_in_background(stack, lag_monitor.run(), "lag monitor")
        reports: GroupReports = (
            PublishedReports(board)
            if board is not None
            else LocalReports(
                lambda: ledger,
                lag_monitor,
                self._waiting,
                memory.folder_reports,
                self.clock,
            )
        )
        page = MetricsPage(self._fleet(metrics.registry), settings.metrics.max_scrapes_per_second)
        return Watching(follower, follow_task, lag_task, reports, page, followed)
