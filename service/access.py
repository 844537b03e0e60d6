"""Who is calling a route, and whether they may touch a group (shared by every ``/v1``
router). The rules themselves are in ``service.auth``."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fastapi import Request

from service.auth import Forbidden, TokenGrant

if TYPE_CHECKING:
    from service.app import Runtime


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def caller(request: Request, *, event: bool) -> TokenGrant | None:
    """The caller's grant (None when no tokens are configured). Events are rate-limited;
    reads need a token with ``read`` unless SIDECAR_PROTECT_READS=false."""
    runtime = runtime_of(request)
    tokens = runtime.tokens
    if tokens is None or (not event and not runtime.settings.protect_reads):
        return None
    grant = tokens.authenticate(request.headers.get("authorization"))
    if event:
        tokens.admit_event(grant, time.monotonic())
    elif not grant.read:
        raise Forbidden(f"token {grant.name!r} may not read state")
    return grant


def allow(grant: TokenGrant | None, group: str | None, topics: Iterable[str] = ()) -> None:
    """Raise ``Forbidden`` unless ``grant`` may touch ``group`` (no tokens: anyone may)."""
    if grant is not None and group is not None:
        grant.check(group, topics)
