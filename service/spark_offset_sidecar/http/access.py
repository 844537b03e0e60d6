"""Who is calling a route, and what they may touch (shared by every ``/v1`` router; the
grants are in ``http.auth``, what each grant may do in docs/secure/index.md).

A route addressed by query id answers a query whose group the token may not touch exactly
as an unknown one: a token learns nothing of other teams' queries, not even that they exist.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fastapi import HTTPException, Request

from spark_offset_sidecar.core.clusters import ClusterOf, UnknownCluster
from spark_offset_sidecar.errors import Forbidden, InvalidEvent
from spark_offset_sidecar.http.auth import TokenGrant

if TYPE_CHECKING:
    from spark_offset_sidecar.http.state import Running, Runtime, Started

log = logging.getLogger(__name__)


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def running_of(request: Request) -> Running:
    """Every part the service started; 503 while it is starting."""
    return running_in(runtime_of(request))


def running_in(runtime: Runtime) -> Running:
    """``running_of``, for a route that has already looked its runtime up (the hot path)."""
    running = runtime.running
    if running is None:
        raise HTTPException(503, "the service is starting")
    return running


def reading_of(request: Request) -> Started:
    """What readers read, in the service or in a watcher; 503 while it is starting."""
    started = runtime_of(request).started
    if started is None:
        raise HTTPException(503, "the service is starting")
    return started


async def caller(request: Request, *, event: bool) -> TokenGrant | None:
    """The caller's grant (None when no tokens are configured, or for a read when reads
    are open). An event needs a write grant and is rate-limited; a read needs a read grant."""
    return await caller_in(runtime_of(request), request, event=event)


async def caller_in(runtime: Runtime, request: Request, *, event: bool) -> TokenGrant | None:
    """``caller``, for a route that has already looked its runtime up (the hot path)."""
    tokens = runtime.tokens
    if tokens is None or (not event and not runtime.settings.auth.protect_reads):
        return None
    grant = await tokens.identify(request.headers.get("authorization"))
    if event:
        if not grant.write:
            raise Forbidden(f"token {grant.name!r} may not change state (it has no write grant)")
        tokens.admit_event(grant, time.monotonic())
    elif not grant.read:
        raise Forbidden(f"token {grant.name!r} may not read state (it has no read grant)")
    return grant


def allow_write(grant: TokenGrant | None, group: str, topics: Iterable[str] = ()) -> None:
    """Raise ``Forbidden`` unless ``grant`` may move ``group``'s offsets (no tokens: anyone)."""
    if grant is not None:
        grant.check_write(group, topics)


def allow_read(grant: TokenGrant | None, group: str) -> None:
    """Raise ``Forbidden`` unless ``grant`` may read ``group``'s state (None: anyone)."""
    if grant is not None:
        grant.check_read(group)


def may_see(request: Request, grant: TokenGrant | None, group: str, *, write: bool) -> bool:
    """Whether ``grant`` may touch ``group`` through a route addressed by query id; a
    refusal is counted and logged like any other, and the route answers "unknown"."""
    if grant is None or (grant.may_write(group) if write else grant.may_read(group)):
        return True
    runtime_of(request).metrics.invalid_events.labels("forbidden").inc()
    log.warning(
        "refused: token %r may not %s group %r (answered as an unknown query)",
        grant.name,
        "write to" if write else "read",
        group,
    )
    return False


def cluster_in(runtime: Runtime, group_id: str, named: str | None) -> ClusterOf:
    """R14: the Kafka cluster of ``group_id``'s event or registration, whose job named
    ``named`` (None: none); a name the service does not have is an ``InvalidEvent``."""
    try:
        return runtime.clusters.of(group_id, named)
    except UnknownCluster as exc:
        raise InvalidEvent("cluster", str(exc)) from None
