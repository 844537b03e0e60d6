"""The watcher, built by ``create_watch_app(settings)``: watching the fleet in a process of
its own, so that taking events is the only thing on the event loop of the process that
takes them (``offset-sidecar serve`` with ``SIDECAR_WATCHER=separate``).

It takes no events and commits nothing. Its ledger follows the store the events' process
writes (``runtime.store_follower``), its lag monitor reads the log ends and evaluates
every group, and it answers what readers read: ``/v1/status``, ``/v1/status/{group}``,
``/ui``, and on ``/metrics`` the per-group series of the store and of the evaluation
(the events' process exports its memory's: ``observe.fleet_metrics``). Same settings as
the events' process (its database, Kafka clusters, tokens, status and metrics settings);
its own port.

Its lifespan checks the schema (the events' process migrates; a watcher never does),
loads the whole ledger (the follower's first step) before it answers ready, then follows
the store and reads the log ends every ``lag_read_interval_seconds``. A failure while
starting stops what had started (the exit stack).

What the store does not hold (the memory of the process taking events: the counters, a
commit in flight and what it waits for, consecutive failures, the jobs' rates from their
progress events, how reading a followed folder goes) a child watcher is told by the
process that started it (``told=True``: ``TOLD_MEMORY`` on its socket;
``runtime.told_memory``), and reads as that process would; so is a watcher of its own
told by its service at ``SIDECAR_WATCHER_URL`` (from a loopback address, or from anywhere
with the watcher's token, ``SIDECAR_WATCHER_TOKEN_FILE``), and a watcher paired with a
replica (``SIDECAR_WATCHER_ADVERTISED_URL``: ``runtime.watcher_pairing``), by that replica
only. Without any of these, it knows none of it.

A told watcher of a replica (``SIDECAR_REPLICATED=true``), child, beside it or paired,
watches that replica's share of the fleet: it is told which replica it watches for and
which groups that replica holds the leases of, evaluates those only, publishes their
reports as that replica on the board every replica reads, and answers readers from the
board. A paired watcher that pairs anew forgets what the last replica told it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

from fastapi import FastAPI, Request, status
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from sqlalchemy import Engine

from spark_offset_sidecar.adapters.sql.followed_folders import SqlFollowedFolders
from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.adapters.watcher.told import ToldRefused, decode_told
from spark_offset_sidecar.app.kafka_clients import KafkaClients
from spark_offset_sidecar.app.parts import (
    add_operational_routes,
    fleet_options,
    new_runtime,
    token_verifier,
)
from spark_offset_sidecar.app.start import (
    Given,
    Watched,
    new_replica_id,
    run_in_background,
    watch_lag,
)
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.http.refusals import exception_answers
from spark_offset_sidecar.http.state import Watching
from spark_offset_sidecar.http.status_page import router as status_page_router
from spark_offset_sidecar.http.status_routes import router as status_router
from spark_offset_sidecar.observe.fleet_metrics import WATCHER_SERIES, FleetExposition, MetricsPage
from spark_offset_sidecar.observe.loop_lag import LoopLag
from spark_offset_sidecar.observe.metrics import SidecarMetrics, package_version
from spark_offset_sidecar.ports.checkpoints import FollowedFolders
from spark_offset_sidecar.ports.group_reports import GroupReports
from spark_offset_sidecar.ports.kafka import LogEndReader, RecordTimeReader
from spark_offset_sidecar.ports.status_board import StatusBoard
from spark_offset_sidecar.ports.store import LedgerRows
from spark_offset_sidecar.ports.watcher import TOLD_MEMORY, WATCHED_METRICS, WatcherPairing
from spark_offset_sidecar.runtime.group_reports import LocalReports, PublishedReports
from spark_offset_sidecar.runtime.store_follower import StoreFollower
from spark_offset_sidecar.runtime.told_memory import ToldMemory
from spark_offset_sidecar.runtime.watcher_pairing import PairingKeeper
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.settings.values import is_loopback

log = logging.getLogger(__name__)

UNTOLD = ""  # a replica's watcher's board before it is told which replica: owns nothing


def create_watch_app(
    settings: Settings,
    *,
    store: LedgerRows | None = None,
    log_ends: LogEndReader | None = None,
    record_times: RecordTimeReader | None = None,
    registry: CollectorRegistry | None = None,
    clock: Callable[[], float] = time.time,
    told: bool = False,
    board: StatusBoard | None = None,
    pairing: WatcherPairing | None = None,
) -> FastAPI:
    """Build the watcher. ``store`` defaults to SQL (``database_url``), ``log_ends`` and
    ``record_times`` to aiokafka; tests may pass others (``testing``). ``told``: it is
    told what its service's memory knows (``TOLD_MEMORY``): as that service's child, or
    beside it (``SIDECAR_WATCHER_URL``). Told, with ``SIDECAR_REPLICATED=true``, it is a
    replica's: it evaluates the groups it is told that replica commits, publishes their
    reports as the replica on the board every replica reads (``board``, by default the
    SQL one), and answers readers from that board. With
    ``SIDECAR_WATCHER_ADVERTISED_URL`` it pairs itself with a replica that then tells it
    (``pairing``, by default PostgreSQL's)."""
    kafka = KafkaClients(settings)
    metrics = SidecarMetrics(
        registry or CollectorRegistry(), kafka.clusters if kafka.several else None
    )
    starting_offsets = kafka.starting_offsets(lambda g: kafka.clusters.of(g).name)
    verifier = token_verifier(settings.oidc)
    runtime = new_runtime(settings, metrics, clock, kafka, starting_offsets, verifier)
    start = WatchStart(
        settings,
        kafka,
        metrics,
        clock,
        Given(log_ends=log_ends, record_times=record_times, status_board=board),
        store,
        told=told,
        replicated=told and settings.replicas.replicated,
        secret=settings.status.watcher_token(),
        given_pairing=pairing,
    )
    ledger = start.ledger

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.callback(log.info, "stopped")
            runtime.started = await start.run(stack)
            runtime.ready = True
            log.info(
                "watching: %d queries, %d groups loaded from the store",
                len(ledger.queries),
                len(ledger.groups),
            )
            try:
                yield
            finally:
                runtime.ready = False

    app = FastAPI(
        title="spark-offset-sidecar watcher",
        version=package_version(),
        description="Watches the fleet of a spark-offset-sidecar: lag, status and the "
        "status page of every group, from the store the service writes.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    runtime.told_problems = lambda: start.memory.problems if start.memory is not None else ()
    answers = exception_answers(metrics)
    app.include_router(status_router)
    app.include_router(status_page_router)
    for exception, answer in answers.items():
        app.add_exception_handler(exception, answer)

    def fleet(registry: CollectorRegistry) -> FleetExposition:
        return FleetExposition(
            lambda: ledger,
            lambda: runtime.started.reading.lag_monitor if runtime.started else None,
            fleet_options(settings.metrics, kafka, WATCHER_SERIES),
            clock,
            head=lambda: generate_latest(registry),
        )

    pace = settings.metrics.max_scrapes_per_second
    add_operational_routes(app, runtime, MetricsPage(fleet(metrics.registry), pace))
    shared = fleet(start.share)

    @app.get(WATCHED_METRICS, include_in_schema=False, response_class=PlainTextResponse)
    async def watched_metrics(request: Request) -> Response:
        """Its share of the /metrics of the service that started it (gzip when asked: the
        service passes it on as it is)."""
        text, packed = await shared.rendered()
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(
                packed, media_type=CONTENT_TYPE_LATEST, headers={"content-encoding": "gzip"}
            )
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    if told:
        app.add_api_route(
            TOLD_MEMORY,
            _told_route(start),
            methods=["POST"],
            include_in_schema=False,
            status_code=status.HTTP_204_NO_CONTENT,
        )
    return app


def _told_route(start: WatchStart) -> Callable[[Request], Awaitable[Response]]:
    async def take_told(request: Request) -> Response:
        return await _take_told(start, request)

    return take_told


async def _take_told(start: WatchStart, request: Request) -> Response:
    """What its service knows of the groups: on its socket (a child), or over TCP from a
    loopback address (SIDECAR_WATCHER_URL: the service beside it), or from anywhere with
    the watcher's token (SIDECAR_WATCHER_TOKEN_FILE); paired, from its replica only."""
    if request.client is not None and (refused := start.refuses_teller(request)) is not None:
        return refused
    memory = start.memory
    if memory is None:
        return PlainTextResponse("the watcher is starting\n", status_code=503)
    try:
        message = decode_told(await request.body())
    except ToldRefused as exc:
        return PlainTextResponse(f"{exc}\n", status_code=400)
    if start.pairing is not None and message.replica != start.pairing.replica:
        paired = start.pairing.replica or "no replica"
        return PlainTextResponse(
            f"this watcher is paired with {paired}, not {message.replica}\n", status_code=409
        )
    if not memory.takes(message):
        return PlainTextResponse(
            "this watcher was told nothing whole yet: tell it everything\n", status_code=409
        )
    memory.take(message)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@dataclass
class WatchStart:
    """The watcher's lifespan's steps; ``run`` once per lifespan."""

    settings: Settings
    kafka: KafkaClients
    metrics: SidecarMetrics
    clock: Callable[[], float]
    given: Given
    store: LedgerRows | None = None
    ledger: Ledger = field(default_factory=Ledger)
    # Its share of a service's /metrics (SIDECAR_WATCHER=child): the lag reads and the
    # per-group series, none of the process-wide ones the service exports too.
    share: CollectorRegistry = field(default_factory=CollectorRegistry)
    told: bool = False  # told its service's memory: its child, beside it, or paired
    replicated: bool = False  # a replica's: told which replica and which groups
    secret: bytes | None = None  # SIDECAR_WATCHER_TOKEN_FILE: a teller over TCP sends it
    # SIDECAR_WATCHER_ADVERTISED_URL: paired with a replica, once ``run`` paired it.
    pairing: PairingKeeper | None = None
    given_pairing: WatcherPairing | None = None  # its store; None: PostgreSQL's
    memory: ToldMemory | None = None  # what it was told, once ``run`` built it
    board: StatusBoard | None = None  # a replica's, once ``run`` built it

    def __post_init__(self) -> None:
        if self.replicated and not self.told:
            raise ValueError("a replica's watcher is told which groups it watches")

    def refuses_teller(self, request: Request) -> Response | None:
        """Why a teller over TCP is refused (401, 403), or None. With the watcher's token
        every teller shows it (compared in constant time); without, only a process of this
        machine or pod tells."""
        if self.secret is None:
            if request.client is not None and is_loopback(request.client.host):
                return None
            refused = "a watcher without SIDECAR_WATCHER_TOKEN_FILE is told from a loopback "
            return PlainTextResponse(refused + "address only\n", status_code=403)
        scheme, _, shown = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(shown.encode(), self.secret):
            return None
        return PlainTextResponse(
            "a watcher is told with the token of SIDECAR_WATCHER_TOKEN_FILE\n",
            status_code=401,
            headers={"www-authenticate": "Bearer"},
        )

    def _paired(self, replica: str | None) -> None:
        """Paired anew (or with none): told by that replica only, from a whole message."""
        if self.memory is not None:
            self.memory.forget_teller()
        if self.board is not None:
            self.board.replica_id = replica or UNTOLD

    async def _pair(self, stack: AsyncExitStack, engine: Engine | None) -> None:
        """Paired with a replica before answering ready (SIDECAR_WATCHER_ADVERTISED_URL)."""
        url = self.settings.status.watcher_advertised_url
        if url is None:
            return
        store = self.given_pairing
        if store is None:
            from spark_offset_sidecar.adapters.sql.watcher_pairs import SqlWatcherPairing

            if engine is None:
                raise ValueError("a paired watcher is given its pairing, or its store is SQL")
            lease = self.settings.replicas.lease_seconds
            store = SqlWatcherPairing(engine, f"watcher-{new_replica_id()}", url, lease)
        keeper = PairingKeeper(
            store, interval=self.settings.replicas.lease_seconds / 6, on_change=self._paired
        )
        self.pairing = keeper
        stack.push_async_callback(keeper.leave)
        await keeper.step()
        run_in_background(stack, keeper.run(), "pairing")

    def _publish_as(self, replica_id: str) -> None:
        """The replica it watches for, as told (another when that replica started again)."""
        if self.board is not None and self.board.replica_id != replica_id:
            log.info("watching for replica %s", replica_id)
            self.board.replica_id = replica_id

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

    async def run(self, stack: AsyncExitStack) -> Watching:
        settings, metrics, ledger = self.settings, self.metrics, self.ledger
        run_in_background(stack, LoopLag(metrics.loop_lag.observe).run(), "loop lag")
        rows: LedgerRows
        followed: FollowedFolders | None = None
        board = self.given.status_board
        engine: Engine | None = None
        if self.store is None:
            rows = sql = SqlStore(settings.database.url)
            engine = sql.engine
            stack.callback(sql.close)
            followed = SqlFollowedFolders(sql.engine)
            if self.replicated and board is None:
                from spark_offset_sidecar.adapters.sql.status_board import SqlStatusBoard

                board = SqlStatusBoard(sql.engine, UNTOLD)
        else:
            rows = self.store
        if self.replicated:
            self.board = board
            ledger.commit_only(set())  # L5: nothing of the replica's until told its groups
        lag_monitor = watch_lag(
            stack,
            Watched(settings, self.kafka, metrics, self.clock),
            lambda: ledger,
            given=self.given,
            board=board,
            waits=self._waiting,  # what its service told of each commit in flight
            reads_also=self.share,
        )
        follower = StoreFollower(
            rows,
            ledger,
            interval=settings.status.lag_read_interval_seconds,
            refreshed=self._refreshed,
            wanted=self._wanted,
        )
        if self.told:  # a group told of but not read yet: the store now, not in a while
            self.memory = ToldMemory(
                ledger,
                lag_monitor.note_job,
                follower.wake,
                watch_more=lag_monitor.wake,
                publish_as=self._publish_as,
                follows_owned=self.replicated,
            )
            lag_monitor.set_folders(self.memory.folder_reports)  # published with the groups
        told = self.memory
        stack.callback(follower.close)
        try:  # a watcher reads columns of the newest schema
            await asyncio.to_thread(rows.check)
        except StoreUnavailable as exc:
            raise StoreUnavailable(
                f"{exc}; a watcher never migrates: start the service that takes events "
                "(offset-sidecar serve) or run offset-sidecar migrate first"
            ) from exc
        await self._pair(stack, engine)
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
                told.folder_reports if told is not None else None,
                self.clock,
            )
        )
        return Watching(follower, follow_task, lag_monitor, lag_task, reports, followed)
