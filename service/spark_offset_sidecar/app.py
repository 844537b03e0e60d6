"""The FastAPI application, built by ``create_app(settings)``.

The lifespan owns everything that runs in the background: it migrates the database,
loads the ledger, starts the commit loop (and with replicas the lease keeper, whose
first round claims a share of the groups before the replica answers ready), and on
shutdown lets commits in flight finish (within ``shutdown_grace_seconds``) and hands
back its leases before closing Kafka and the database. ``/readyz``
answers 200 only between those two points.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from spark_offset_sidecar.adapters.checkpoints.fsspec_storage import (
    FsspecCheckpointStorage,
    check_path,
)
from spark_offset_sidecar.adapters.kafka.admin import KafkaCommittedReader
from spark_offset_sidecar.adapters.kafka.committer import KafkaOffsetCommitter
from spark_offset_sidecar.adapters.kafka.log_ends import KafkaLogEndReader
from spark_offset_sidecar.adapters.kafka.options import kafka_client_options
from spark_offset_sidecar.adapters.kafka.record_times import KafkaRecordTimeReader
from spark_offset_sidecar.adapters.kafka.starting_offsets import KafkaStartingOffsetsReader
from spark_offset_sidecar.adapters.sql.followed_folders import SqlFollowedFolders
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.core.clusters import Clusters
from spark_offset_sidecar.core.group_status import CommitWindows
from spark_offset_sidecar.core.leases import Ownership
from spark_offset_sidecar.core.ledger import Backoff
from spark_offset_sidecar.errors import StoreError
from spark_offset_sidecar.http.auth import TokenRegistry
from spark_offset_sidecar.http.body_limit import BodySizeLimit
from spark_offset_sidecar.http.event_routes import router
from spark_offset_sidecar.http.follow_routes import router as follow_router
from spark_offset_sidecar.http.progress_route import ProgressRoute
from spark_offset_sidecar.http.refusals import exception_answers
from spark_offset_sidecar.http.state import Running, Runtime
from spark_offset_sidecar.http.status_page import router as status_page_router
from spark_offset_sidecar.http.status_routes import router as status_router
from spark_offset_sidecar.observe.fleet_metrics import FleetExposition, FleetOptions, MetricsPage
from spark_offset_sidecar.observe.metrics import HeapView, SidecarMetrics, package_version
from spark_offset_sidecar.ports.checkpoints import CheckpointStorage, FollowedFolders
from spark_offset_sidecar.ports.identity import TokenVerifier
from spark_offset_sidecar.ports.kafka import (
    CommittedOffsetsReader,
    LogEndReader,
    OffsetCommitter,
    RecordTimeReader,
    StartingOffsetsReader,
)
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.store import LedgerStore
from spark_offset_sidecar.runtime.by_cluster import (
    ClusterCommittedReaders,
    ClusterCommitters,
    ClusterStartingOffsets,
)
from spark_offset_sidecar.runtime.checkpoint_follower import REASONS, CheckpointFollower
from spark_offset_sidecar.runtime.commit_loop import CommitLoop
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.runtime.group_reports import LocalReports, PublishedReports
from spark_offset_sidecar.runtime.identity_keys import keep_keys_fresh
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.runtime.lag_monitors import LagMonitors
from spark_offset_sidecar.settings import Settings

if TYPE_CHECKING:  # replicas' modules need the postgres extra: imported when replicated
    from spark_offset_sidecar.runtime.lease_keeper import LeaseKeeper

log = logging.getLogger(__name__)


def create_app(  # noqa: C901, PLR0915  (the composition root, every mode)
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
    heap: HeapView | None = None,
) -> FastAPI:
    """Build the service. ``store`` defaults to SQL (``database_url``), ``committer``,
    ``log_ends``, ``starting_offsets`` and (with replicas) ``committed_reader`` to aiokafka
    (``kafka_bootstrap_servers``), ``checkpoint_storage`` to fsspec and
    ``followed_folders`` to the SQL store's table and (with replicas) ``status_board`` to
    its ``group_reports``, ``record_times`` to aiokafka when ``log_ends`` is Kafka too;
    tests may pass others (``testing``). ``heap``: the process's heap keeper, whose pauses
    are exported (``cli.process_tuning`` installs it; the app changes nothing of the
    interpreter's)."""
    metrics = SidecarMetrics(registry or CollectorRegistry())
    clusters = settings.clusters()
    # Each Kafka cluster (keyed as the ledger keeps it, None the default) with its own
    # client options, made once: every client of a cluster shares its token provider.
    options_of = {
        clusters.stored(name): kafka_client_options(settings.for_cluster(name))
        for name in clusters.names
    }
    several = len(options_of) > 1

    def said(key: str | None, what: str) -> str:  # "Kafka token", "Kafka (eu) token"
        return what if not several else what.replace("Kafka", f"Kafka ({clusters.name_of(key)})", 1)

    opened: list[DurableLedger] = []  # the ledger, once the lifespan has opened it

    def group_cluster(group_id: str) -> str | None:
        group = opened[0].ledger.groups.get(group_id) if opened else None
        return group.cluster if group is not None else clusters.of(group_id).name

    if starting_offsets is None:
        readers = {
            key: KafkaStartingOffsetsReader(o, request_timeout=settings.commit_timeout_seconds)
            for key, o in options_of.items()
        }
        starting_offsets = (
            ClusterStartingOffsets(readers, group_cluster) if several else readers[None]
        )
    runtime = Runtime(settings, metrics, clock, starting_offsets)
    for key, options in options_of.items():
        tokens_source = options.get("sasl_oauth_token_provider")
        if tokens_source is not None:
            runtime.identity_problems.append(_problem(said(key, "Kafka token"), tokens_source))
    verifier = _token_verifier(settings)
    if verifier is not None:
        runtime.identity_problems.append(
            lambda: verifier.problem and f"jobs' token issuer: {verifier.problem}"
        )
    if heap is not None:  # the process's heap keeper (``cli.process_tuning``)
        metrics.watch_heap(heap)
    fleet = FleetExposition(
        lambda: opened[0].ledger,  # built only once running (the /metrics route)
        lambda: runtime.running.lag_monitor if runtime.running else None,
        FleetOptions(
            granularity=settings.metrics_granularity,
            groups=settings.metrics_groups,
            exclude_groups=settings.metrics_exclude_groups,
            topics=settings.metrics_topics,
            exclude_topics=settings.metrics_exclude_topics,
            export_kafka_lag=settings.export_kafka_lag,
            max_age=settings.metrics_max_age_seconds,
            cluster_names=clusters.name_of if several else None,
        ),
        clock,
        head=lambda: generate_latest(metrics.registry),
    )
    if settings.tokens_file:
        runtime.tokens = TokenRegistry.from_file(settings.tokens_file, verifier)
    storage = checkpoint_storage or FsspecCheckpointStorage(settings.checkpoint_storage_options)
    if checkpoint_storage is None:
        runtime.check_folder = check_path

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:  # noqa: C901, PLR0912, PLR0915  (starts every part in order)
        # Each part registers how it stops as it starts: a failure while starting stops
        # what had started, and shutdown stops everything in the reverse order.
        async with AsyncExitStack() as stack:
            stack.callback(log.info, "stopped")
            replica_id = new_replica_id() if settings.replicated else None
            # What is built here is known by its type, never tested for it: ``sql`` is the
            # SQL store built here (None: a store was given), ``committers`` and
            # ``kafka_log_ends`` the Kafka clients built here.
            sql: SqlStore | None = None
            ledger_store: LedgerStore
            if store is None:
                sql = ledger_store = _sql_store(settings, replica_id, metrics)
                stack.callback(sql.close)  # also closed with the ledger: idempotent
                await asyncio.to_thread(sql.migrate)
            else:
                ledger_store = store
            durable = await DurableLedger.open(
                ledger_store,
                max_pending=settings.max_pending_checkpoints,
                backoff=Backoff(settings.retry_initial_seconds, settings.retry_max_seconds),
                refresh_after=settings.recommit_idle_after_seconds,
                commit_interval=settings.min_commit_interval_seconds,
            )
            stack.push_async_callback(durable.close)
            opened[:] = [durable]
            if verifier is not None:
                await verifier.refresh()  # a wrong issuer URL shows on /readyz at once
                _run_in_background(
                    stack,
                    keep_keys_fresh(verifier, settings.oidc_jwks_refresh_seconds, KEYS_RETRY),
                    "issuer keys",
                )
            committers = {
                key: KafkaOffsetCommitter(
                    options, timeout=settings.commit_timeout_seconds, replica_id=replica_id
                )
                for key, options in options_of.items()
                if committer is None
            }
            for key, each in committers.items():
                runtime.identity_problems.append(_problem(said(key, "Kafka"), each))
            kafka: OffsetCommitter = (
                committer
                if committer is not None
                else ClusterCommitters(committers)
                if several
                else committers[None]
            )
            stack.push_async_callback(kafka.close)
            ownership = None
            if replica_id is not None:
                ownership = Ownership(
                    replica_id, settings.lease_seconds, settings.commit_timeout_seconds
                )
                durable.ledger.commit_only(set())  # L5: nothing until claimed
                metrics.groups_owned.set_function(lambda: len(ownership.epochs))
            commit_loop = CommitLoop(durable, kafka, metrics, clock=clock, ownership=ownership)
            board = status_board
            if ownership is not None and sql is not None:
                from spark_offset_sidecar.adapters.sql.change_notices import PostgresChangeNotices
                from spark_offset_sidecar.adapters.sql.lease_store import LeaseStore
                from spark_offset_sidecar.adapters.sql.status_board import SqlStatusBoard
                from spark_offset_sidecar.runtime.lease_keeper import LeaseKeeper

                # A double committer never wrote to Kafka: nothing there to read back.
                read_back: CommittedOffsetsReader | None = committed_reader
                if read_back is None and committer is None:
                    backs = {
                        key: KafkaCommittedReader(
                            options, request_timeout=settings.commit_timeout_seconds
                        )
                        for key, options in options_of.items()
                    }
                    read_back = (
                        ClusterCommittedReaders(backs, group_cluster) if several else backs[None]
                    )
                    stack.push_async_callback(read_back.close)
                keeper = LeaseKeeper(
                    LeaseStore(sql.engine, ownership.replica_id, settings.lease_seconds),
                    PostgresChangeNotices(settings.database_url),
                    ownership,
                    durable,
                    on_owned=commit_loop.wake,
                    read_back=read_back,
                    read_back_after=settings.commit_timeout_seconds,
                    on_mismatch=lambda _group: metrics.takeover_mismatches.inc(),
                )
                if board is None:
                    board = SqlStatusBoard(sql.engine, ownership.replica_id)
                # Leases are handed back after the commit loop stopped (registered before it).
                stack.push_async_callback(_leave, keeper, commit_loop)
                await keeper.round()  # hold a share of the groups before answering ready
                _run_in_background(stack, keeper.run(), "lease keeper")
                _run_in_background(stack, keeper.listen(), "notices")
            durable.on_settled = _on_settled(commit_loop, metrics)
            commit_task = asyncio.create_task(commit_loop.run(), name="commit loop")
            stack.push_async_callback(
                _stop_commits, commit_loop, commit_task, settings.shutdown_grace_seconds
            )
            # Each cluster's log ends are read by its own monitor (a topic of one name on two
            # clusters is two topics); tests may pass one reader (one cluster).
            kafka_log_ends = {
                key: KafkaLogEndReader(options, timeout=settings.commit_timeout_seconds)
                for key, options in options_of.items()
                if log_ends is None
            }
            log_readers: dict[str | None, LogEndReader] = (
                {None: log_ends} if log_ends is not None else dict(kafka_log_ends)
            )
            for log_reader in log_readers.values():
                stack.push_async_callback(log_reader.close)
            time_readers: dict[str | None, RecordTimeReader] = {}
            if record_times is not None:
                time_readers[None] = record_times
            elif settings.read_record_times and log_ends is None:
                time_readers = {
                    key: KafkaRecordTimeReader(options, timeout=settings.commit_timeout_seconds)
                    for key, options in options_of.items()
                }
            for time_reader in time_readers.values():
                stack.push_async_callback(time_reader.close)
            resending: list[KafkaOffsetCommitter | KafkaLogEndReader] = [
                *committers.values(),
                *kafka_log_ends.values(),
            ]
            metrics.watch_resent(lambda: sum(adapter.resent for adapter in resending))
            monitors = {
                key: LagMonitor(
                    lambda: durable.ledger,
                    reader,
                    interval=settings.lag_read_interval_seconds,
                    err_after_failures=settings.status_err_after_failures,
                    windows=CommitWindows(
                        settings.status_window, settings.status_stop_after_seconds
                    ),
                    clock=clock,
                    board=board,
                    record_times=time_readers.get(key),
                    risk_seconds=settings.retention_risk_seconds,
                    waits=kafka.waiting,
                    one_cluster=len(log_readers) > 1,
                    cluster=key,
                )
                for key, reader in log_readers.items()
            }
            lag_monitor = LagMonitors(monitors) if len(monitors) > 1 else monitors[None]
            metrics.watch_lag(
                lag_monitor,
                {clusters.name_of(k): m for k, m in monitors.items()} if several else None,
            )
            lag_task = _run_in_background(stack, lag_monitor.run(), "lag monitor")
            followed = followed_folders or (
                SqlFollowedFolders(sql.engine) if sql is not None else None
            )
            follower = None
            if followed is not None:
                follower = CheckpointFollower(
                    storage,
                    followed,
                    durable,
                    interval=settings.follow_interval_seconds,
                    relist_every=settings.follow_relist_every,
                    read_timeout=settings.follow_read_timeout_seconds,
                    clock=clock,
                    clusters=clusters,
                )
                lag_monitor.set_folders(follower.reports)  # published with the groups
                metrics.watch_folders(follower.figures, lambda: storage.requests, REASONS)
                _run_in_background(stack, follower.run(), "checkpoint follower")
            _warn_of_dropped_clusters(durable, clusters)
            runtime.running = Running(
                durable,
                commit_loop,
                commit_task,
                lag_monitor,
                lag_task,
                reports=PublishedReports(board)
                if board is not None
                else LocalReports(
                    lambda: durable.ledger,
                    lag_monitor,
                    kafka.waiting,
                    follower.reports if follower is not None else None,
                    clock,
                ),
                followed=followed,
                follower=follower,
            )
            runtime.ready = True
            log.info("ready: %d queries, %d groups loaded", *_sizes(durable))
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
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes, metrics=metrics)
    app.include_router(router)
    app.include_router(status_router)
    app.include_router(follow_router)
    app.include_router(status_page_router)
    for exception, answer in answers.items():
        app.add_exception_handler(exception, answer)
    page = MetricsPage(fleet, settings.metrics_max_scrapes_per_second)
    _add_operational_routes(app, runtime, page)
    return app


def _warn_of_dropped_clusters(durable: DurableLedger, clusters: Clusters) -> None:
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


class _SaysProblem(Protocol):
    @property
    def problem(self) -> str | None: ...


def _problem(what: str, source: _SaysProblem) -> Callable[[], str | None]:
    """``source``'s problem, when it has one, as ``/readyz`` says it: "what: problem"."""
    return lambda: (problem := source.problem) and f"{what}: {problem}"


KEYS_RETRY = 10.0  # seconds between fetches of the issuer's keys while they fail


def _token_verifier(settings: Settings) -> TokenVerifier | None:
    """The jobs' JWT verifier when an issuer is set (PyJWT, the ``oidc`` extra, imported
    only then)."""
    if not settings.oidc_issuer or not settings.oidc_audience:
        return None
    from spark_offset_sidecar.adapters.oidc.jwks_verifier import JwksVerifier

    return JwksVerifier(
        settings.oidc_issuer,
        settings.oidc_audience,
        jwks_url=settings.oidc_jwks_url,
        ca_file=settings.oidc_ca_file,
        bearer_file=settings.oidc_bearer_token_file,
        refresh=settings.oidc_jwks_refresh_seconds,
    )


def new_replica_id() -> str:
    """Unique per process start: a restarted pod is a new owner (its memory is new)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def _sql_store(settings: Settings, replica_id: str | None, metrics: SidecarMetrics) -> SqlStore:
    if replica_id is None:
        return SqlStore(settings.database_url)
    from spark_offset_sidecar.adapters.sql.shared_store import SharedSqlStore

    return SharedSqlStore(
        settings.database_url,
        replica_id,
        on_fenced=metrics.commits_fenced.inc,
        on_step=lambda step, seconds: metrics.store_step_cpu.labels(step).inc(seconds),
    )


async def _leave(keeper: LeaseKeeper, loop: CommitLoop) -> None:
    """Hand back the leases: cleanly when no commit was cut short by the stop."""
    try:
        await keeper.leave(clean=loop.cancelled == 0)
    except Exception as exc:  # the leases expire on their own
        log.warning("could not hand back leases: %s", exc)


async def _stop_commits(loop: CommitLoop, task: asyncio.Task[None], grace: float) -> None:
    """Let commits in flight finish (within ``grace``), then end the loop."""
    await loop.stop(grace)
    await _cancel(task)


def _run_in_background(
    stack: AsyncExitStack, work: Coroutine[Any, Any, None], name: str
) -> asyncio.Task[None]:
    """``work`` as a task, cancelled (and awaited) when ``stack`` closes."""
    task = asyncio.create_task(work, name=name)
    stack.push_async_callback(_cancel, task)
    return task


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _on_settled(loop: CommitLoop, metrics: SidecarMetrics) -> Callable[[int, float], None]:
    def settled(items: int, seconds: float) -> None:
        metrics.store_batch_items.observe(items)
        metrics.store_write_duration.observe(seconds)
        loop.wake()  # the batch's groups are no longer held

    return settled


def _sizes(durable: DurableLedger) -> tuple[int, int]:
    return len(durable.ledger.queries), len(durable.ledger.groups)


def _add_operational_routes(app: FastAPI, runtime: Runtime, page: MetricsPage) -> None:
    @app.get("/livez", tags=["operations"], response_class=PlainTextResponse)
    async def livez() -> Response:
        problem = runtime.live_problem()
        if problem:
            return PlainTextResponse(problem + "\n", status_code=503)
        return PlainTextResponse("ok\n")

    @app.get("/readyz", tags=["operations"], response_class=PlainTextResponse)
    async def readyz() -> Response:
        if not runtime.ready or runtime.running is None:
            return PlainTextResponse("starting or stopping\n", status_code=503)
        try:
            await runtime.running.durable.check_store()
        except StoreError as exc:
            return PlainTextResponse(f"database: {exc}\n", status_code=503)
        # Events are taken and kept whatever Kafka or an issuer says: ready all the same,
        # with the reason on the page (and in the log, once per change).
        problems = "".join(f"warning: {problem}\n" for problem in runtime.problems())
        return PlainTextResponse(f"ok\n{problems}")

    @app.get("/metrics", tags=["operations"], response_class=PlainTextResponse)
    async def metrics(request: Request) -> Response:
        """The process-wide series, then the per-group ones (``observe.fleet_metrics``:
        built in slices, shared by scrapes that come together, paced)."""
        if runtime.running is None:
            return Response(
                generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST
            )
        accepts = request.headers.get("accept-encoding", "")
        body, headers = await page.answer(accepts_gzip="gzip" in accepts)
        return Response(body, media_type=CONTENT_TYPE_LATEST, headers=headers)
