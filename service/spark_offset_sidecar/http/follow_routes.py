"""``/v1/followed-folders``: which Spark checkpoint folders the service follows, into
which group (``runtime.checkpoint_follower`` reads them; docs/attach/checkpoint-folder.md).

Registering or removing a folder needs a ``write`` grant on its group, and the token's
topic patterns go with the folder; listing needs ``read``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from spark_offset_sidecar.errors import InvalidEvent
from spark_offset_sidecar.http.access import (
    allow_write,
    caller,
    cluster_in,
    running_of,
    runtime_of,
)
from spark_offset_sidecar.http.folders import readable_folders, view
from spark_offset_sidecar.http.models import FolderPath, FolderView, FollowRequest, refusals
from spark_offset_sidecar.http.refusals import refusal, refusal_body
from spark_offset_sidecar.http.state import Runtime
from spark_offset_sidecar.ports.checkpoints import FollowedFolder

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/followed-folders", tags=["followed folders"])
ERRORS = refusals(401, 403, 404, 409, 422, 503)


def normalized(path: str, runtime: Runtime) -> str:
    """The folder's one spelling (no trailing ``/``), or ``InvalidEvent``."""
    path = path.rstrip("/")
    if "://" not in path and not path.startswith("/"):
        raise InvalidEvent("path", "a local folder must be an absolute path")
    if problem := runtime.check_folder(path):
        raise InvalidEvent("path", problem)
    return path


@router.post("", status_code=201, response_model=FolderView, responses=ERRORS)
async def follow(body: FollowRequest, request: Request) -> FolderView | JSONResponse:
    """Follow ``path`` into ``group_id``: each ``commits/N`` Spark writes there commits
    the offsets of ``offsets/N`` to the group."""
    grant = await caller(request, event=True)
    allow_write(grant, body.group_id)
    runtime = runtime_of(request)
    cluster_in(runtime, body.group_id, body.cluster)  # a cluster the service has
    path = normalized(body.path, runtime)
    folder = FollowedFolder(
        path,
        body.group_id,
        grant.topics if grant else None,
        grant.name if grant else None,
        body.cluster,
    )
    existing = await asyncio.to_thread(running_of(request).followed.add, folder)
    if existing is not None:
        if existing.group_id != folder.group_id:
            return refusal(
                409,
                "conflict",
                f"{path} is already followed into group {existing.group_id!r}; "
                "remove it first (DELETE /v1/followed-folders?path=...)",
            )
        found = await running_of(request).reports.folders([existing.group_id])
        return JSONResponse(view(existing, found.get(path)).model_dump(), status_code=200)
    log.info("following checkpoint folder %s into group %s", path, folder.group_id)
    running_of(request).follower.wake()
    return view(folder, None)


@router.get("", response_model=list[FolderView], responses=ERRORS)
async def followed(request: Request) -> list[FolderView]:
    """Every followed folder (with a token: those whose groups it may read)."""
    return await readable_folders(request, await caller(request, event=False))


@router.delete("", responses=ERRORS)
async def unfollow(
    request: Request, path: Annotated[FolderPath, Query(description="the folder")]
) -> JSONResponse:
    """Stop following ``path``. The query it fed stays (``DELETE /v1/queries/{id}``
    releases it); offsets already committed stay in Kafka."""
    grant = await caller(request, event=True)
    registry = running_of(request).followed
    path = path.rstrip("/")
    folder = next((f for f in await asyncio.to_thread(registry.list) if f.path == path), None)
    if folder is None or (grant is not None and not grant.may_read(folder.group_id)):
        return refusal(404, "unknown_folder", f"{path} is not followed")
    allow_write(grant, folder.group_id)
    await asyncio.to_thread(registry.remove, path)
    log.info("no longer following checkpoint folder %s (group %s)", path, folder.group_id)
    return JSONResponse(refusal_body("removed", f"{path} is no longer followed"))
