"""The readers' routes (``/v1/status``, ``/v1/status/{group}``, ``/ui``) of a service
whose watcher is its child, passed on to it with the caller's token (docs/run/processes.md);
a watcher that does not answer is a 503. Their schema is the watcher's own routes'.

The watcher follows the store a step behind: until it knows a group whose first event was
just taken, ``/v1/status/{group}`` is answered here, never a 404 for a group this holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from spark_offset_sidecar.errors import WatcherUnavailable
from spark_offset_sidecar.http.status_routes import get_status
from spark_offset_sidecar.ports.watcher import WatcherLink

FORWARDED = ("/v1/status", "/v1/status/{group_id}", "/ui")
PASSED_ON = ("authorization", "accept")  # the caller's headers the watcher reads


def forwarding_router(watcher: WatcherLink) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    async def forward(request: Request) -> Response:
        headers = {h: v for h in PASSED_ON if (v := request.headers.get(h)) is not None}
        # The path as it came, still percent-encoded: a group's name of any bytes (a NUL
        # too) reaches the watcher, which refuses what it must, as this process would.
        path = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1")
        try:
            answer = await watcher.get(path, request.url.query, headers)
        except WatcherUnavailable as exc:
            return PlainTextResponse(f"{exc}\n", status_code=503, headers={"retry-after": "5"})
        return Response(answer.body, status_code=answer.status, headers=dict(answer.headers))

    async def forward_group(request: Request) -> Response:
        answer = await forward(request)
        if answer.status_code != 404:
            return answer
        found = await get_status(request.path_params["group_id"], request)  # as read here
        return found if isinstance(found, Response) else JSONResponse(jsonable_encoder(found))

    for path in FORWARDED:
        one_group = path == "/v1/status/{group_id}"
        router.add_api_route(path, forward_group if one_group else forward, methods=["GET"])
    return router


def watcher_share(watcher: WatcherLink) -> Callable[[], Awaitable[bytes]]:
    """The watcher's share of ``/metrics``, gzipped (nothing while it does not answer)."""

    async def share() -> bytes:
        try:
            return await watcher.share()
        except WatcherUnavailable:
            return b""

    return share
