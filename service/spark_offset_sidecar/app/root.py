"""The FastAPI application, built by ``create_app(settings, parts)``: the parts known
before starting (settings, metrics, tokens, the Kafka clusters' options, the topology),
the routes, and the lifespan that starts everything else (``app.start``) and hands routes
a fully built ``Running``. ``/readyz`` answers 200 only between the end of the start and
the beginning of the shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from spark_offset_sidecar.adapters.checkpoints.fsspec_storage import (
    FsspecCheckpointStorage,
    check_path,
)
from spark_offset_sidecar.adapters.watcher.child import PROBLEM
from spark_offset_sidecar.app.parts import Parts
from spark_offset_sidecar.app.shared import (
    add_operational_routes,
    new_runtime,
    token_verifier,
)
from spark_offset_sidecar.app.start import Start
from spark_offset_sidecar.app.watcher_brief import WatcherBrief
from spark_offset_sidecar.http.body_limit import BodySizeLimit
from spark_offset_sidecar.http.event_routes import router
from spark_offset_sidecar.http.follow_routes import router as follow_router
from spark_offset_sidecar.http.progress_route import ProgressRoute
from spark_offset_sidecar.http.refusals import exception_answers
from spark_offset_sidecar.http.status_page import router as status_page_router
from spark_offset_sidecar.http.status_routes import router as status_router
from spark_offset_sidecar.http.watcher_routes import forwarding_router
from spark_offset_sidecar.observe.metrics import package_version
from spark_offset_sidecar.ports.kafka import Problem
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.topology import Topology

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Commits Spark Structured Streaming's Kafka offsets to a consumer group on every "
    "checkpoint, so that lag tools see Spark jobs."
)


def create_app(settings: Settings, parts: Parts) -> FastAPI:
    """Build the service from ``settings`` and ``parts`` (``app.parts``: its Kafka clients
    and database, how its watcher is made)."""
    topology = Topology.resolve(
        replicated=settings.replicas.replicated, database=parts.database.url
    )
    metrics = parts.metrics
    verifier = token_verifier(settings.oidc)
    watcher = parts.watcher(WatcherBrief(settings=settings, topology=topology))
    # The watcher's problem, then Kafka refusing one.
    problems: list[Problem] = [lambda: watcher.problem and f"{PROBLEM}{watcher.problem}"]
    runtime = new_runtime(
        settings,
        metrics,
        parts.clock,
        parts.kafka,
        verifier,
        topology,
        check_folder=check_path,
        problems=problems + parts.kafka.committer_problems(),
    )
    storage = FsspecCheckpointStorage(settings.follow.storage_options)
    start = Start(
        settings, topology, runtime, parts.kafka, parts.database, storage, verifier, watcher
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.callback(log.info, "stopped")
            log.info("starting: %s", topology.describe())
            runtime.life.running = runtime.life.started = running = await start.run(stack)
            runtime.life.ready = True
            ledger = running.durable.ledger
            log.info("ready: %d queries, %d groups loaded", len(ledger.queries), len(ledger.groups))
            try:
                yield
            finally:
                runtime.life.ready = False

    app = FastAPI(
        title="spark-offset-sidecar",
        version=package_version(),
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    answers = exception_answers(metrics)
    app.add_middleware(ProgressRoute, handlers=answers)  # inside the body limit
    app.add_middleware(BodySizeLimit, max_bytes=settings.http.max_body_bytes, metrics=metrics)
    app.include_router(router)
    app.include_router(follow_router)
    forwarded_at = len(app.routes)
    app.include_router(forwarding_router(watcher))  # the readers' routes, its watcher's
    for exception, answer in answers.items():
        app.add_exception_handler(exception, answer)
    add_operational_routes(app, runtime)
    document_readers_routes(app, forwarded_at)
    return app


def document_readers_routes(app: FastAPI, at: int) -> None:
    """The OpenAPI schema of the routes passed to the watcher (included at ``at`` among the
    app's routes): its own routes' (their models, parameters and answers), in their place."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            routes = list(app.routes)
            routes[at : at + 1] = [*status_router.routes, *status_page_router.routes]
            app.openapi_schema = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=routes,
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
