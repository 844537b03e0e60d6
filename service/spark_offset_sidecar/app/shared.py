"""What both compositions build alike: the process that takes events (``app.root``)
and the watcher (``app.watch``): the jobs' token verifier, the metrics, the runtime, and
the operational routes (``/livez``, ``/readyz``, ``/metrics``, ``/v1/service``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from spark_offset_sidecar.app.kafka_clients import problem_of
from spark_offset_sidecar.errors import StoreError
from spark_offset_sidecar.http.auth import TokenRegistry
from spark_offset_sidecar.http.service_route import router as service_router
from spark_offset_sidecar.http.state import Runtime, any_folder
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.identity import TokenVerifier
from spark_offset_sidecar.ports.kafka import KafkaReading, Problem
from spark_offset_sidecar.settings import OidcSettings, Settings
from spark_offset_sidecar.topology import Topology


def new_metrics(settings: Settings) -> SidecarMetrics:
    """The process's series; by cluster when there are several Kafka clusters."""
    clusters = settings.clusters.choice()
    return SidecarMetrics(CollectorRegistry(), clusters if len(clusters.names) > 1 else None)


def token_verifier(oidc: OidcSettings) -> TokenVerifier | None:
    """The jobs' JWT verifier when an issuer is set (PyJWT, the ``oidc`` extra, imported
    only then)."""
    if not oidc.issuer or not oidc.audience:
        return None
    from spark_offset_sidecar.adapters.oidc.jwks_verifier import JwksVerifier

    return JwksVerifier(
        oidc.issuer,
        oidc.audience,
        jwks_url=oidc.jwks_url,
        ca_file=oidc.ca_file,
        bearer_file=oidc.bearer_token_file,
        refresh=oidc.jwks_refresh_seconds,
    )


def new_runtime(
    settings: Settings,
    metrics: SidecarMetrics,
    clock: Callable[[], float],
    kafka: KafkaReading,
    verifier: TokenVerifier | None,
    topology: Topology,
    *,
    check_folder: Callable[[str], str | None] = any_folder,
    problems: Sequence[Problem] = (),
    service_problems: Callable[[], Sequence[str]] = tuple,
) -> Runtime:
    """What the routes reach, with the tokens and the identity problems both processes
    check (Kafka's tokens, the jobs' token issuer), then a process's own ``problems``."""
    issuer = () if verifier is None else (problem_of("jobs' token issuer", verifier),)
    tokens_file = settings.auth.tokens_file
    return Runtime(
        settings,
        metrics,
        clock,
        topology,
        tokens=TokenRegistry.from_file(tokens_file, verifier) if tokens_file else None,
        identity_problems=(*kafka.token_problems(), *issuer, *problems),
        check_folder=check_folder,
        service_problems=service_problems,
    )


def add_operational_routes(app: FastAPI, runtime: Runtime) -> None:
    @app.get("/livez", tags=["operations"], response_class=PlainTextResponse)
    async def livez() -> Response:
        problem = runtime.live_problem()
        if problem:
            return PlainTextResponse(problem + "\n", status_code=503)
        return PlainTextResponse("ok\n")

    @app.get("/readyz", tags=["operations"], response_class=PlainTextResponse)
    async def readyz() -> Response:
        if not runtime.ready or runtime.started is None:
            return PlainTextResponse("starting or stopping\n", status_code=503)
        try:
            await runtime.started.check_store()
        except StoreError as exc:
            return PlainTextResponse(f"database: {exc}\n", status_code=503)
        # Events are taken and kept whatever Kafka or an issuer says: ready all the same,
        # with the reason on the page (and in the log, once per change).
        problems = "".join(f"warning: {problem}\n" for problem in runtime.problems())
        return PlainTextResponse(f"ok\n{problems}")

    @app.get("/metrics", tags=["operations"], response_class=PlainTextResponse)
    async def metrics(request: Request) -> Response:
        """The process-wide series, then the per-group ones, the watcher's
        (``observe.fleet_metrics``: built in slices, shared by scrapes that come together,
        paced)."""
        if runtime.started is None:
            return Response(
                generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST
            )
        accepts = request.headers.get("accept-encoding", "")
        body, headers = await runtime.started.page.answer(accepts_gzip="gzip" in accepts)
        return Response(body, media_type=CONTENT_TYPE_LATEST, headers=headers)

    app.include_router(service_router)
