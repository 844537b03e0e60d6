"""``GET /v1/service``: the version and what runs where (``topology``). No grant needed."""

from __future__ import annotations

from fastapi import APIRouter, Request

from spark_offset_sidecar.http.access import runtime_of
from spark_offset_sidecar.http.models import ServiceView
from spark_offset_sidecar.observe.metrics import package_version

router = APIRouter(tags=["operations"])


@router.get("/v1/service")
async def get_service(request: Request) -> ServiceView:
    topology = runtime_of(request).topology
    return ServiceView(
        version=package_version(),
        watcher=topology.watcher,
        writer=topology.writer,
        replicated=topology.replicated,
        database=topology.database,
    )
