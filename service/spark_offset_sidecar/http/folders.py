"""The followed folders a grant may read, each with how reading it goes: for
``GET /v1/followed-folders`` and for the status page, which a watcher serves."""

from __future__ import annotations

import asyncio

from fastapi import Request

from spark_offset_sidecar.core.lag.report import FolderReport
from spark_offset_sidecar.http.access import reading_of
from spark_offset_sidecar.http.auth import TokenGrant
from spark_offset_sidecar.http.models import FolderView
from spark_offset_sidecar.ports.checkpoints import FollowedFolder


def view(folder: FollowedFolder, found: tuple[FolderReport, str | None] | None) -> FolderView:
    read, reader = found if found is not None else (None, None)
    return FolderView(
        path=folder.path,
        group_id=folder.group_id,
        cluster=folder.cluster,
        topics=None if folder.topics is None else list(folder.topics),
        reading=read is not None,
        read_by=reader,
        query_id=read.query_id if read else None,
        newest_batch_in_folder=read.newest_batch_in_folder if read else None,
        last_batch_recorded=read.last_batch_recorded if read else None,
        pending_batch=read.pending_batch if read else None,
        behind_seconds=read.behind_seconds if read else 0.0,
        errors=dict(read.errors) if read else {},
        last_error=read.last_error if read else None,
        last_poll_at=read.last_poll_at if read else None,
    )


async def readable_folders(request: Request, grant: TokenGrant | None) -> list[FolderView]:
    """The followed folders ``grant`` may read, with how reading each goes."""
    reading = reading_of(request)  # the service's or a watcher's
    folders = [
        f
        for f in await asyncio.to_thread(reading.followed.list)
        if grant is None or grant.may_read(f.group_id)
    ]
    found = await reading.reports.folders({f.group_id for f in folders})
    return [view(f, found.get(f.path)) for f in folders]
