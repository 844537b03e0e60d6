"""The watcher's side of its channel (``adapters.child_process``): its app's lifespan run,
and each of its service's requests (a GET or POST of a route, ``ChannelRequest``) run
through the app as a server would run it, answered with an ``Answer``
(``adapters.watcher.child`` asks them)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from spark_offset_sidecar.adapters.child_process import ChannelEnd
from spark_offset_sidecar.ports.watcher import Answer

log = logging.getLogger(__name__)

STARTING = Answer(503, {"content-type": "text/plain; charset=utf-8"}, b"the watcher is starting\n")
# A request on the channel: method, path (percent-encoded, as it came), query, headers, body.
ChannelRequest = tuple[str, str, str, Mapping[str, str], bytes]


def answer_on_channel(channel: ChannelEnd, app: Any) -> int:
    """Run ``app``'s lifespan and answer the requests on ``channel`` until its input closes
    or SIGTERM comes; requests before the app has started are answered 503. 1 if the app
    could not start (said in the log)."""
    return asyncio.run(_answer_on_channel(channel, app))


async def _answer_on_channel(channel: ChannelEnd, app: Any) -> int:
    loop = asyncio.get_running_loop()
    started, stop = asyncio.Event(), asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    answering: set[asyncio.Task[None]] = set()

    async def answer(number: int, request: ChannelRequest) -> None:
        reply = await asgi_call(app, *request) if started.is_set() else STARTING
        await asyncio.to_thread(channel.reply, number, reply)  # a big page: off the loop

    def take(number: int, request: ChannelRequest) -> None:
        task = loop.create_task(answer(number, request))
        answering.add(task)
        task.add_done_callback(answering.discard)

    def read() -> None:
        for number, request in channel.requests():
            loop.call_soon_threadsafe(take, number, request)
        loop.call_soon_threadsafe(stop.set)  # the service closed it: stopping, or gone

    threading.Thread(target=read, name="channel", daemon=True).start()
    try:
        async with app.router.lifespan_context(app):
            started.set()
            await stop.wait()
    except Exception:
        log.exception("the watcher could not start")
        return 1
    return 0


async def asgi_call(
    app: Any, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
) -> Answer:
    """One request run through ``app`` (its lifespan started) as uvicorn would run it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(path),
        "raw_path": path.encode("latin-1"),
        "root_path": "",
        "query_string": query.encode("latin-1"),
        "headers": [
            (b"host", b"watcher"),
            *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()),
        ],
        "client": None,
        "server": ("watcher", 80),
        "state": {},
    }
    status, answer_headers, chunks = 500, {}, []
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:  # the body was read: the client waits (never disconnects)
            await asyncio.Event().wait()
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            for name, value in message.get("headers", ()):
                answer_headers[name.decode("latin-1")] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    try:
        await app(scope, receive, send)
    except Exception:
        log.exception("the watcher failed to answer %s %s", method, path)
        return Answer(500, {"content-type": "text/plain; charset=utf-8"}, b"the watcher failed\n")
    return Answer(status, answer_headers, b"".join(chunks))
