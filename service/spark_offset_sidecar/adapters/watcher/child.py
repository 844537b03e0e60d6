"""The watcher as a child of the process that takes events (``topology``), asked over its
channel (``adapters.child_process``): each request a GET or POST of its app's routes, run
there as a server would run it (``adapters.watcher.answering``).

Its first request at each start is its brief (``app.watcher_brief``), and its environment
is the service's without the ``SIDECAR_*`` variables. ``run`` starts it again whenever it
exits. ``problem`` is None only while the last request to it was answered; a request not
answered in ``timeout`` seconds is ``WatcherUnavailable``. ``AskedWatcher`` is the asking
and the reading of answers, whatever carries them (the tests' watcher shares it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from spark_offset_sidecar.adapters.child_process import Channel, ChildGone, Supervisor, exit_status
from spark_offset_sidecar.adapters.watcher.memory_update import encode_memory_update
from spark_offset_sidecar.errors import WatcherUnavailable
from spark_offset_sidecar.ports.watcher import (
    MEMORY_UPDATES,
    WATCHED_METRICS,
    Answer,
    ChannelRequest,
    MemoryUpdate,
)

log = logging.getLogger(__name__)

NOT_PASSED = "SIDECAR_"  # the settings' variables: the child is handed its service's
CHECK_EVERY = 5.0  # seconds between questions of whether the child is ready
PROBLEM = "watcher: "  # how the service names its watcher's problem among its own
FIRST_READY = 60.0  # seconds a starting service waits for its child to be ready
# What of the child's answer is passed on to a reader.
ANSWER_HEADERS = (
    "content-type",
    "cache-control",
    "www-authenticate",
    "retry-after",
    "refresh",
    "content-security-policy",  # /ui's (``http.status_page``)
    "x-content-type-options",
    "referrer-policy",
)


class AskedWatcher(ABC):
    """How a watcher is asked and its answers read, whatever carries the requests
    (``_carry``: raises ``ChildGone`` while nothing answers)."""

    def __init__(self, *, timeout: float = 30.0) -> None:
        self._timeout = timeout
        self._problem: str | None = "the watcher is starting"

    @property
    def problem(self) -> str | None:
        return self._problem

    @property
    @abstractmethod
    def running(self) -> bool: ...

    @abstractmethod
    async def _carry(self, request: ChannelRequest) -> Answer: ...

    async def first_ready(self) -> bool:
        """Wait until the watcher answers ready (True) or has ended (False); the caller
        bounds the wait (``asyncio.timeout``)."""
        while self.running:
            with contextlib.suppress(WatcherUnavailable):
                if (await self.get("/readyz", "", {})).status == 200:
                    return True
            await asyncio.sleep(0.1)
        return False

    async def _ask(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Answer:
        try:
            async with asyncio.timeout(self._timeout):
                answer = await self._carry((method, path, query, dict(headers), body))
        except (ChildGone, TimeoutError) as exc:
            if self._problem is None:
                self._problem = f"the watcher does not answer: {exc!r}"
            raise WatcherUnavailable(self._problem) from None
        return answer

    async def get(self, path: str, query: str, headers: Mapping[str, str]) -> Answer:
        answer = await self._ask("GET", path, query, headers)
        starting = answer.status == 503 and path == "/readyz"
        self._problem = "the watcher is starting" if starting else None
        kept = {k: answer.headers[k] for k in ANSWER_HEADERS if k in answer.headers}
        return Answer(answer.status, kept, answer.body)

    async def share(self) -> bytes:
        """Its share of ``/metrics``, gzip-compressed as it sent it (not inflated here)."""
        answer = await self._ask("GET", WATCHED_METRICS, "", {"accept-encoding": "gzip"})
        if answer.status != 200 or answer.headers.get("content-encoding") != "gzip":
            raise WatcherUnavailable(f"the watcher answered {answer.status}")
        return answer.body

    async def tell(self, update: MemoryUpdate) -> None:
        body = await asyncio.to_thread(
            encode_memory_update, update
        )  # a whole fleet's: off the loop
        answer = await self._ask("POST", MEMORY_UPDATES, "", {}, body)
        if answer.status != 204:
            raise WatcherUnavailable(
                f"the watcher answered {answer.status} to a memory update: "
                f"{answer.body[:200].decode(errors='replace')}"
            )
        self._problem = None


class WatcherChild(AskedWatcher):
    def __init__(self, command: Sequence[str], brief: bytes, *, timeout: float = 30.0) -> None:
        """``command``: the watcher program (``child_command("watcher", ...)``); ``brief``:
        its first request at each start (``app.watcher_brief``)."""
        super().__init__(timeout=timeout)
        env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_PASSED)}
        self.supervisor = Supervisor("watcher", command, death_signal=signal.SIGTERM, env=env)
        self._brief = brief
        self._channel: Channel | None = None  # the running child's

    @property
    def generation(self) -> int:
        return self.supervisor.starts

    @property
    def running(self) -> bool:
        return self.supervisor.running

    async def start(self) -> None:
        self._channel = channel = Channel(await self.supervisor.start())
        with contextlib.suppress(ChildGone, TimeoutError):  # ``run`` and ``problem`` say
            async with asyncio.timeout(self._timeout):
                await channel.ask(self._brief)

    async def run(self) -> None:
        """Ask the child whether it is ready every ``CHECK_EVERY`` seconds (``problem``), and
        start it again whenever it exits."""
        while True:
            ended = asyncio.ensure_future(self.supervisor.wait())
            try:
                while not ended.done():
                    await asyncio.wait({ended}, timeout=CHECK_EVERY)
                    if not ended.done():
                        with contextlib.suppress(WatcherUnavailable):
                            await self.get("/readyz", "", {})
            finally:
                ended.cancel()
            self._problem = f"the watcher {exit_status(ended.result())}; starting it again"
            await self.start()

    async def _carry(self, request: ChannelRequest) -> Answer:
        if self._channel is None:
            raise ChildGone("the watcher has not started")
        answer: Answer = await self._channel.ask(request)
        return answer

    async def stop(self) -> None:
        await self.supervisor.stop()
