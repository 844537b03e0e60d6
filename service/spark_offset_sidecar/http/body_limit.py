"""ASGI middleware that refuses request bodies over a size with 413, before parsing them.

Checks the declared ``Content-Length`` first and counts the bytes as they arrive, so a
chunked body cannot slip past the limit.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from spark_offset_sidecar.http.refusals import refusal_bytes
from spark_offset_sidecar.observe.metrics import SidecarMetrics


class BodySizeLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int, metrics: SidecarMetrics) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        # Read the whole (bounded) body first, then hand it to the app in one message.
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, replayed(bytes(body), receive), send)

    async def _refuse(self, send: Send) -> None:
        self.metrics.invalid_events.labels("too_large").inc()
        body = refusal_bytes(
            "invalid",
            f"request body is larger than {self.max_bytes} bytes (SIDECAR_MAX_BODY_BYTES)",
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def replayed(body: bytes, receive: Receive) -> Receive:
    """``receive`` that hands ``body`` over in one message first."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
