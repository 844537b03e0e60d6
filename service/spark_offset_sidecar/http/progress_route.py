"""``POST /v1/progress``, the hot path, as a plain ASGI route in front of FastAPI's router
(docs/decisions.md, "The progress route in plain ASGI").

It skips FastAPI's routing, dependencies and body model, not the body limit, the tokens,
grants and rate limits, nor the recording (``event_routes.record_progress``). Only a
well-formed event (``ProgressEvent``'s shape) is answered here; anything else goes on, with
its body, to the FastAPI route, so every refusal has one definition. A refusal raised while
recording is answered by the application's own handlers (``http.refusals``), looked up by
the exception's class as Starlette does. ``tests/http/test_progress_route.py`` compares both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from spark_offset_sidecar.core.names import CLUSTER, GROUP_ID
from spark_offset_sidecar.http.body_limit import replayed
from spark_offset_sidecar.http.event_routes import record_progress
from spark_offset_sidecar.http.refusals import Handler

PATH = "/v1/progress"
_FIELDS = frozenset({"group_id", "progress"})
_FIELDS_WITH_CLUSTER = _FIELDS | {"cluster"}


class ProgressRoute:
    def __init__(self, app: ASGIApp, *, handlers: Mapping[type[Exception], Handler]) -> None:
        self.app = app
        self.handlers = dict(handlers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        event = _well_formed(scope, body)
        if event is None:  # FastAPI's route refuses it, as it always did
            await self.app(scope, replayed(body, receive), send)
            return
        request = Request(scope, receive)
        try:
            response = await record_progress(
                request, event["group_id"], event["progress"], event.get("cluster")
            )
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Handler | None:
        for cls in type(exc).__mro__:
            if cls in self.handlers:
                return self.handlers[cls]
        return None


async def _read_body(receive: Receive) -> bytes:
    """The whole body (``BodySizeLimit`` has bounded it and hands it in one message)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _well_formed(scope: Scope, body: bytes) -> dict[str, Any] | None:
    """The event, if it has ``ProgressEvent``'s shape; else None."""
    content_type = b""
    for name, value in scope["headers"]:
        if name == b"content-type":
            content_type = value
    if not content_type.startswith(b"application/json"):
        return None
    try:
        event = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if type(event) is not dict or not _FIELDS <= event.keys() <= _FIELDS_WITH_CLUSTER:
        return None
    valid = (
        GROUP_ID.is_valid(event["group_id"])
        and type(event["progress"]) is dict
        and ("cluster" not in event or CLUSTER.is_valid(event["cluster"]))
    )
    return event if valid else None
