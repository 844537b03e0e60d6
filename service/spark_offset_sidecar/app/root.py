"""The FastAPI application, built by ``create_app(settings)``: the parts known before
starting (settings, metrics, tokens, the Kafka clusters' options), the routes, and the
lifespan that starts everything else (``app.start``) and hands routes a fully built
``Running``. ``/readyz`` answers 200 only between the end of the start and the beginning of
the shutdown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, generate_latest

from spark_offset_sidecar.adapters.checkpoints.fsspec_storage import (
    FsspecCheckpointStorage,
    check_path,
)
from spark_offset_sidecar.adapters.watcher.child import PROBLEM, WatcherChild
from spark_offset_sidecar.adapters.watcher.remote import WatcherAt
from spark_offset_sidecar.app.kafka_clients import KafkaClients
from spark_offset_sidecar.app.parts import (
    add_operational_routes,
    fleet_options,
    new_runtime,
    token_verifier,
)
from spark_offset_sidecar.app.start import Given, ProcessHeap, Start, group_cluster
from spark_offset_sidecar.http.body_limit import BodySizeLimit
from spark_offset_sidecar.http.event_routes import router
from spark_offset_sidecar.http.follow_routes import router as follow_router
from spark_offset_sidecar.http.progress_route import ProgressRoute
from spark_offset_sidecar.http.refusals import exception_answers
from spark_offset_sidecar.http.status_page import router as status_page_router
from spark_offset_sidecar.http.status_routes import router as status_router
from spark_offset_sidecar.http.watcher_routes import forwarding_router, watcher_share
from spark_offset_sidecar.observe.fleet_metrics import (
    ALL_SERIES,
    MEMORY_SERIES,
    FleetExposition,
    MetricsPage,
)
from spark_offset_sidecar.observe.metrics import SidecarMetrics, package_version
from spark_offset_sidecar.ports.checkpoints import CheckpointStorage, FollowedFolders
from spark_offset_sidecar.ports.kafka import (
    CommittedOffsetsReader,
    LogEndReader,
    OffsetCommitter,
    RecordTimeReader,
    StartingOffsetsReader,
)
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.store import LedgerStore
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.settings import Settings

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    *,
    store: LedgerStore | None = None,
    committer: OffsetCommitter | None = None,
    log_ends: LogEndReader | None = None,
    starting_offsets: StartingOffsetsReader | None = None,
    committed_reader: CommittedOffsetsReader | None = None,
    checkpoint_storage: CheckpointStorage | None = None,
    followed_folders: FollowedFolders | None = None,
    status_board: StatusBoard | None = None,
    record_times: RecordTimeReader | None = None,
    registry: CollectorRegistry | None = None,
    clock: Callable[[], float] = time.time,
    heap: ProcessHeap | None = None,
) -> FastAPI:
    """Build the service. ``store`` defaults to SQL (``database_url``), ``committer``,
    ``log_ends``, ``starting_offsets`` and (with replicas) ``committed_reader`` to aiokafka
    (``kafka_bootstrap_servers``), ``checkpoint_storage`` to fsspec and
    ``followed_folders`` to the SQL store's table and (with replicas) ``status_board`` to
    its ``group_reports``, ``record_times`` to aiokafka when ``log_ends`` is Kafka too;
    tests may pass others (``testing``). ``heap``: the process's heap keeper, whose pauses
    are exported (``cli.process_tuning`` installs it; the app changes nothing of the
    interpreter's)."""
    kafka = KafkaClients(settings)
    metrics = SidecarMetrics(
        registry or CollectorRegistry(), kafka.clusters if kafka.several else None
    )
    opened: list[DurableLedger] = []  # the ledger, once the lifespan has opened it
    verifier = token_verifier(settings.oidc)
    storage = checkpoint_storage or FsspecCheckpointStorage(settings.follow.storage_options)
    runtime = new_runtime(
        settings,
        metrics,
        clock,
        kafka,
        starting_offsets or kafka.starting_offsets(group_cluster(opened, kafka.clusters)),
        verifier,
    )
    # SIDECAR_WATCHER=child: a watcher process, started with the rest, answers the readers.
    child = WatcherChild() if settings.status.watcher == "child" else None
    if child is not None:
        runtime.identity_problems.append(lambda: child.problem and f"{PROBLEM}{child.problem}")
    start = Start(
        settings,
        runtime,
        kafka,
        Given(
            store,
            committer,
            log_ends,
            committed_reader,
            followed_folders,
            status_board,
            record_times,
        ),
        storage,
        verifier,
        opened,
        heap,
        child,
        told_link(settings),
    )
    if checkpoint_storage is None:
        runtime.check_folder = check_path
    if heap is not None:  # the process's heap keeper (``cli.process_tuning``)
        metrics.watch_heap(heap)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.callback(log.info, "stopped")
            runtime.running = runtime.started = running = await start.run(stack)
            runtime.ready = True
            ledger = running.durable.ledger
            log.info("ready: %d queries, %d groups loaded", len(ledger.queries), len(ledger.groups))
            try:
                yield
            finally:
                runtime.ready = False

    app = FastAPI(
        title="spark-offset-sidecar",
        version=package_version(),
        description="Commits Spark Structured Streaming's Kafka offsets to a consumer group "
        "on every checkpoint, so that lag tools see Spark jobs.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    answers = exception_answers(metrics)
    app.add_middleware(ProgressRoute, handlers=answers)  # inside the body limit
    app.add_middleware(BodySizeLimit, max_bytes=settings.http.max_body_bytes, metrics=metrics)
    watching_here = settings.status.watches_here
    _include_routes(app, watching_here, child)
    for exception, answer in answers.items():
        app.add_exception_handler(exception, answer)
    fleet = FleetExposition(
        lambda: opened[0].ledger,  # built only once running (the /metrics route)
        lambda: runtime.running.lag_monitor if runtime.running else None,
        fleet_options(settings.metrics, kafka, ALL_SERIES if watching_here else MEMORY_SERIES),
        clock,
        head=lambda: generate_latest(metrics.registry),
        tail=watcher_share(child) if child is not None else None,
    )
    add_operational_routes(
        app, runtime, MetricsPage(fleet, settings.metrics.max_scrapes_per_second)
    )
    return app


def told_link(settings: Settings) -> WatcherAt | None:
    """The watcher run on its own that this process tells: at SIDECAR_WATCHER_URL, or
    (paired) wherever the watcher paired with this replica is, as each lease renewal reads
    it; None when it tells none (its watcher is its child, or here, or told nothing)."""
    status = settings.status
    if status.watcher_url is None and status.watcher != "paired":
        return None
    return WatcherAt(status.watcher_url, token=status.watcher_token())


def _include_routes(app: FastAPI, watching_here: bool, child: WatcherChild | None) -> None:
    """Every route; the readers' only where the fleet is watched here, or forwarded to the
    child that watches it (else a watcher of its own answers them: ``app.watch``)."""
    readers = (status_router, status_page_router)
    for routes in (router, status_router, follow_router, status_page_router):
        if watching_here or routes not in readers:
            app.include_router(routes)
    if child is not None:
        app.include_router(forwarding_router(child))
