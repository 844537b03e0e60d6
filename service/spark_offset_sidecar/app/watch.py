"""The watcher, built by ``create_watch_app(settings, topology, kafka, database)``: the
service's child process (``topology``) that watches the fleet, so that taking events is
the only thing on the event loop of the process that takes them.

It takes no events and commits nothing. Its ledger follows the database the service
writes (``runtime.store_follower``), its lag monitor reads the log ends and evaluates
every group, and it answers what readers read, through its service's port:
``/v1/status``, ``/v1/status/{group}``, ``/ui``, and its share of ``/metrics``: every
per-group series (``observe.fleet_metrics``), of the database, of the evaluation and of
what its service told it of its memory; the service exports its own process's series.
Its service's settings and topology, as its service hands them (``app.watcher_brief``);
it answers its service's requests on its channel (``adapters.watcher.answering``), not on
a port.

Its lifespan builds every part at once (``start_watching``: the database opened as
``database`` says, ``open_database`` in the child, the lag monitors, the follower, its
memory), checks the schema (the service migrates; a watcher never does), loads the whole
ledger (the follower's first step) before it answers ready, then follows the database and
reads the log ends every ``lag_read_interval_seconds``. A failure while starting stops
what had started (the exit stack).

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
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

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
    new_metrics,
    new_runtime,
    token_verifier,
)
from spark_offset_sidecar.app.watching import run_in_background
from spark_offset_sidecar.core.lag.status import CommitWindows
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.http.refusals import exception_answers
from spark_offset_sidecar.http.state import Runtime, Watching
from spark_offset_sidecar.http.status_page import router as status_page_router
from spark_offset_sidecar.http.status_routes import router as status_router
from spark_offset_sidecar.observe.fleet_metrics import FleetExposition, FleetOptions, MetricsPage
from spark_offset_sidecar.observe.loop_lag import LoopLag
from spark_offset_sidecar.observe.metrics import package_version
from spark_offset_sidecar.ports.checkpoints import FollowedFolders
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


@dataclass(frozen=True)
class WatchedDatabase:
    """The database a watcher follows, opened once a lifespan: the SQL store its service
    writes, its followed folders and, with replicas, the board its replica publishes on
    (None: its reports are kept in its memory)."""

    store: SqlStore
    followed: FollowedFolders
    board: StatusBoard | None


OpenDatabase = Callable[[AsyncExitStack, Settings, Topology], WatchedDatabase]


def open_database(stack: AsyncExitStack, settings: Settings, topology: Topology) -> WatchedDatabase:
    """The SQL database of ``settings``, closed with ``stack``; with replicas, its board."""
    sql = SqlStore(settings.database.url)
    stack.callback(sql.close)
    board: StatusBoard | None = None
    if topology.replicated:
        from spark_offset_sidecar.adapters.sql.status_board import SqlStatusBoard

        board = SqlStatusBoard(sql.engine, NO_REPLICA_YET)
    return WatchedDatabase(sql, SqlFollowedFolders(sql.engine), board)


@dataclass(frozen=True, kw_only=True)
class Watched(Watching):
    """What a watcher's lifespan started, every part built: with what its service told it
    (``memory``) and its share of its service's /metrics (the lag reads and every per-group
    series, none of the process-wide ones the service exports too)."""

    memory: WatcherMemory
    share: FleetExposition


def create_watch_app(
    settings: Settings,
    topology: Topology,
    kafka: KafkaReading,
    database: OpenDatabase,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """Build the watcher of a service that runs as ``topology`` says (its own, resolved by
    the service), on the Kafka clients ``kafka`` (``app.kafka_clients``; tests hand in
    ``testing.MemoryKafka``) and the database ``database`` opens (``open_database``)."""
    metrics = new_metrics(settings)
    verifier = token_verifier(settings.oidc)
    runtime: Runtime = new_runtime(
        settings,
        metrics,
        clock,
        kafka,
        verifier,
        topology,
        service_problems=lambda: told_problems(runtime),
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.callback(log.info, "stopped")
            watched = await start_watching(stack, runtime, kafka, database)
            runtime.life.started = watched
            runtime.life.ready = True
            ledger = watched.follower.ledger
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

    # Its service's routes, asked once it started (``adapters.watcher.answering``).
    @app.get(WATCHED_METRICS, include_in_schema=False, response_class=PlainTextResponse)
    async def watched_metrics(request: Request) -> Response:
        """Its share of its service's /metrics (gzip when asked: the service passes it on
        as it is)."""
        if not isinstance(watched := runtime.started, Watched):
            return starting()
        text, packed = await watched.share.rendered()
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(
                packed, media_type=CONTENT_TYPE_LATEST, headers={"content-encoding": "gzip"}
            )
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    @app.post(MEMORY_UPDATES, include_in_schema=False, status_code=status.HTTP_204_NO_CONTENT)
    async def take_memory_update(request: Request) -> Response:
        """What its service knows of the groups (its channel only: no port serves this app)."""
        if not isinstance(watched := runtime.started, Watched):
            return starting()
        memory = watched.memory
        try:
            message = decode_memory_update(await request.body())
        except MemoryUpdateRefused as exc:
            return PlainTextResponse(f"{exc}\n", status_code=400)
        if not memory.takes(message):
            return PlainTextResponse(
                "this watcher was told nothing whole yet: tell it everything\n", status_code=409
            )
        memory.take(message)
        watched.share.stale()  # its service's next scrape shows what it was told
        watched.page.page.stale()
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    return app


def starting() -> Response:
    return PlainTextResponse("the watcher is starting\n", status_code=503)


def told_problems(runtime: Runtime) -> tuple[str, ...]:
    """The identity problems its service told it (none before it started)."""
    watched = runtime.started
    return watched.memory.problems if isinstance(watched, Watched) else ()


async def start_watching(
    stack: AsyncExitStack, runtime: Runtime, kafka: KafkaReading, database: OpenDatabase
) -> Watched:
    """Every part built, then started: the database opened, its memory, the lag monitors
    and the store follower on one ledger (each calls the others once running), the
    schema checked and the whole ledger loaded."""
    settings, topology, clock = runtime.settings, runtime.topology, runtime.clock
    metrics = runtime.metrics
    run_in_background(stack, LoopLag(metrics.loop_lag.observe).run(), "loop lag")
    opened = database(stack, settings, topology)
    ledger = Ledger()
    if topology.replicated:
        ledger.commit_only(set())  # L5: nothing of the replica's until told its groups
    monitor: LagMonitor | LagMonitors  # built below, on the memory: called once running
    follower: StoreFollower
    memory = WatcherMemory(
        ledger,
        lambda group_id, rates: monitor.note_job(group_id, rates),
        lambda: follower.wake(),  # a group told of but not read yet: the database now
        watch_more=lambda: monitor.wake(),
        publish_as=lambda replica_id: monitor.publish_as(replica_id),
        follows_owned=topology.replicated,
    )
    share_registry = CollectorRegistry()
    monitor = lag_monitors(stack, runtime, kafka, ledger, opened.board, memory, share_registry)
    follower = StoreFollower(
        opened.store,
        ledger,
        interval=settings.status.lag_read_interval_seconds,
        refreshed=memory.refreshed,
        wanted=memory.wanted,
    )
    stack.callback(follower.close)
    try:  # a watcher reads columns of the newest schema
        await asyncio.to_thread(opened.store.check)
    except StoreUnavailable as exc:
        raise StoreUnavailable(
            f"{exc}; a watcher never migrates: its service (offset-sidecar serve) "
            "migrates before starting it"
        ) from exc
    await follower.step()  # the whole ledger, before answering ready
    follow_task = run_in_background(stack, follower.run(), "store follower")
    lag_task = run_in_background(stack, monitor.run(), "lag monitor")
    reports: GroupReports = (
        PublishedReports(opened.board)
        if opened.board is not None
        else LocalReports(lambda: ledger, monitor, memory.waiting, memory.folder_reports, clock)
    )
    options = fleet_options(settings)

    def fleet(registry: CollectorRegistry) -> FleetExposition:
        return FleetExposition(
            lambda: ledger,
            lambda: monitor,
            memory,
            options,
            clock,
            head=lambda: generate_latest(registry),
        )

    page = MetricsPage(fleet(metrics.registry), settings.metrics.max_scrapes_per_second)
    return Watched(
        follower,
        follow_task,
        lag_task,
        reports,
        page,
        opened.followed,
        memory=memory,
        share=fleet(share_registry),
    )


def fleet_options(settings: Settings) -> FleetOptions:
    """The options of ``/metrics``' per-group series, which the watcher builds."""
    metrics, clusters = settings.metrics, settings.clusters.choice()
    return FleetOptions(
        granularity=metrics.granularity,
        groups=metrics.groups,
        exclude_groups=metrics.exclude_groups,
        topics=metrics.topics,
        exclude_topics=metrics.exclude_topics,
        export_kafka_lag=metrics.export_kafka_lag,
        max_age=metrics.max_age_seconds,
        cluster_names=clusters.name_of if len(clusters.names) > 1 else None,
    )


def lag_monitors(
    stack: AsyncExitStack,
    runtime: Runtime,
    kafka: KafkaReading,
    ledger: Ledger,
    board: StatusBoard | None,
    memory: WatcherMemory,
    share_registry: CollectorRegistry,
) -> LagMonitor | LagMonitors:
    """One lag monitor per cluster (a topic of one name on two clusters is two topics),
    on its log-end and record-time readers, its reads exported on both ``/metrics``. A
    group's commit in flight waits for what its service told, and how reading its
    followed folders goes is published with its report."""
    status, metrics = runtime.settings.status, runtime.metrics
    readers, times = kafka.log_ends(), kafka.record_times()
    for reader in readers.values():
        stack.push_async_callback(reader.close)
    for time_reader in times.values():
        stack.push_async_callback(time_reader.close)
    metrics.watch_resent(kafka.resent())
    monitors = {
        key: LagMonitor(
            lambda: ledger,
            reader,
            interval=status.lag_read_interval_seconds,
            err_after_failures=status.status_err_after_failures,
            windows=CommitWindows(status.status_window, status.status_stop_after_seconds),
            clock=runtime.clock,
            board=board,
            record_times=times.get(key),
            risk_seconds=status.retention_risk_seconds,
            waits=memory.waiting,
            one_cluster=len(readers) > 1,
            cluster=key,
            folders=memory.folder_reports,
        )
        for key, reader in readers.items()
    }
    metrics.watch_lag(monitors, also=share_registry)
    return LagMonitors(monitors) if len(monitors) > 1 else monitors[None]
