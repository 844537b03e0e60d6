"""``/v1/followed-folders``: which Spark checkpoint folders the service follows, into
which group (``runtime.checkpoint_follower`` reads them).

Same tokens and grants as events: registering or removing a folder needs a ``write``
grant on its group, and the token's topic patterns go with the folder (a batch whose
topics they do not allow is refused, as an event would be). Listing needs ``read``.
Status codes: 201 registered, 200 already registered the same way or removed, 404 not
followed, 409 followed into another group, 422 a path the service cannot read.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from spark_offset_sidecar.errors import InvalidEvent
from spark_offset_sidecar.http.access import allow_write, caller, runtime_of
from spark_offset_sidecar.http.models import ErrorAnswer, FolderPath, FolderView, FollowRequest
from spark_offset_sidecar.http.state import Runtime
from spark_offset_sidecar.ports.checkpoints import FollowedFolder, FollowedFolders

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/followed-folders", tags=["followed folders"])
ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorAnswer} for code in (401, 403, 404, 409, 422, 503)
}


def normalized(path: str, runtime: Runtime) -> str:
    """The folder's one spelling (no trailing ``/``); raises ``InvalidEvent`` for a path
    the service cannot follow."""
    path = path.rstrip("/")
    if "://" not in path and not path.startswith("/"):
        raise InvalidEvent("path", "a local folder must be an absolute path")
    if problem := runtime.check_folder(path):
        raise InvalidEvent("path", problem)
    return path


def _registry(runtime: Runtime) -> FollowedFolders:
    if runtime.followed is None:
        raise HTTPException(503, "the service is starting")
    return runtime.followed


def view(runtime: Runtime, folder: FollowedFolder) -> FolderView:
    follower = runtime.follower
    state = follower.states.get(folder.path) if follower is not None else None
    here = state is not None and state.polls > 0
    position = state.position if state is not None else None
    return FolderView(
        path=folder.path,
        group_id=folder.group_id,
        topics=None if folder.topics is None else list(folder.topics),
        followed_here=here,
        query_id=position.query_id if position else None,
        newest_batch_in_folder=state.newest_in_folder if state else None,
        last_batch_recorded=position.completed if position else None,
        pending_batch=position.pending if position else None,
        behind_seconds=state.behind_seconds(follower.monotonic()) if state and follower else 0.0,
        errors=dict(state.errors) if state else {},
        last_error=state.last_error if state else None,
        last_poll_at=state.polled_at if state else None,
    )


@router.post("", status_code=201, response_model=FolderView, responses=ERRORS)
async def follow(body: FollowRequest, request: Request) -> FolderView | JSONResponse:
    """Follow ``path`` into ``group_id``: each ``commits/N`` Spark writes there commits
    the offsets of ``offsets/N`` to the group."""
    grant = caller(request, event=True)
    allow_write(grant, body.group_id)
    runtime = runtime_of(request)
    path = normalized(body.path, runtime)
    folder = FollowedFolder(
        path, body.group_id, grant.topics if grant else None, grant.name if grant else None
    )
    existing = await asyncio.to_thread(_registry(runtime).add, folder)
    if existing is not None:
        if existing.group_id != folder.group_id:
            return JSONResponse(
                {
                    "outcome": "conflict",
                    "detail": f"{path} is already followed into group {existing.group_id!r}; "
                    "remove it first (DELETE /v1/followed-folders?path=...)",
                    "errors": [],
                },
                status_code=409,
            )
        return JSONResponse(view(runtime, existing).model_dump(), status_code=200)
    log.info("following checkpoint folder %s into group %s", path, folder.group_id)
    if runtime.follower is not None:
        runtime.follower.wake()
    return view(runtime, folder)


@router.get("", response_model=list[FolderView], responses=ERRORS)
async def followed(request: Request) -> list[FolderView]:
    """Every followed folder (with a token: those whose groups it may read)."""
    grant = caller(request, event=False)
    runtime = runtime_of(request)
    folders = await asyncio.to_thread(_registry(runtime).list)
    return [view(runtime, f) for f in folders if grant is None or grant.may_read(f.group_id)]


@router.delete("", responses=ERRORS)
async def unfollow(
    request: Request, path: Annotated[FolderPath, Query(description="the folder")]
) -> JSONResponse:
    """Stop following ``path``. The query it fed stays (``DELETE /v1/queries/{id}``
    releases it); offsets already committed stay in Kafka."""
    grant = caller(request, event=True)
    runtime = runtime_of(request)
    registry = _registry(runtime)
    path = path.rstrip("/")
    folder = next((f for f in await asyncio.to_thread(registry.list) if f.path == path), None)
    if folder is None or (grant is not None and not grant.may_read(folder.group_id)):
        return JSONResponse(
            {"outcome": "unknown_folder", "detail": f"{path} is not followed", "errors": []},
            status_code=404,
        )
    allow_write(grant, folder.group_id)
    await asyncio.to_thread(registry.remove, path)
    log.info("no longer following checkpoint folder %s (group %s)", path, folder.group_id)
    return JSONResponse(
        {"outcome": "removed", "detail": f"{path} is no longer followed", "errors": []}
    )
