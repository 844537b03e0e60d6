"""The watcher's side of its channel (``adapters.child_process``): its app's lifespan run,
and each of its service's requests (``ChannelRequest``: a GET or POST of a route) run
through the app as a server would run it (httpx's ASGI transport), answered with an
``Answer``, its body as the route made it (``adapters.watcher.child`` asks them).
``Answering`` is that, whatever carries the requests (the tests' watcher is asked in their
event loop: ``tests.support.watcher``)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from typing import Any

import httpx

from spark_offset_sidecar.adapters.child_process import ChannelEnd
from spark_offset_sidecar.ports.watcher import Answer, ChannelRequest

log = logging.getLogger(__name__)

STARTING = Answer(503, {"content-type": "text/plain; charset=utf-8"}, b"the watcher is starting\n")


class Answering:
    """``app``'s requests, answered 503 until its lifespan (``run``) has started."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.started = asyncio.Event()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a bug: a 500
        self._client = httpx.AsyncClient(transport=transport, base_url="http://watcher")

    async def answer(self, request: ChannelRequest) -> Answer:
        method, path, query, headers, body = request
        if not self.started.is_set():
            return STARTING
        url = httpx.URL(path, query=query.encode("latin-1"))
        async with self._client.stream(method, url, headers=headers, content=body) as got:
            raw = b"".join([chunk async for chunk in got.aiter_raw()])  # not inflated
        return Answer(got.status_code, dict(got.headers), raw)

    async def run(self, stop: asyncio.Event) -> None:
        """The app's lifespan, until ``stop`` is set; raises what stopped it starting."""
        try:
            async with self.app.router.lifespan_context(self.app):
                self.started.set()
                await stop.wait()
        finally:
            self.started.clear()
            await self._client.aclose()


def answer_on_channel(channel: ChannelEnd, app: Any) -> int:
    """Run ``app``'s lifespan and answer the requests on ``channel`` until its input closes
    or SIGTERM comes; requests before the app has started are answered 503. 1 if the app
    could not start (said in the log)."""
    return asyncio.run(_answer_on_channel(channel, app))


async def _answer_on_channel(channel: ChannelEnd, app: Any) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    answering: set[asyncio.Task[None]] = set()
    asked = Answering(app)

    async def answer(number: int, request: ChannelRequest) -> None:
        reply = await asked.answer(request)
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
        await asked.run(stop)
    except Exception:
        log.exception("the watcher could not start")
        return 1
    return 0
