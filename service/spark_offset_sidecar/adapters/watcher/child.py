"""The watcher (the ``child`` program's watcher) as a child of the process that takes events
(``topology``), reached over a Unix socket of its own.

The child reads its service's settings and topology from its standard input, where each
start writes the brief it is given (``app.watcher_brief``), and none from its
environment: the service's, without the ``SIDECAR_*`` variables. It listens on
``SOCKET_ENV``'s socket instead of a port (a replica's child is told which replica it
publishes as, with what else it is told). Its process is run by a ``Supervisor``
(``adapters.child_process``): ``start`` spawns it; ``run`` starts it again whenever it
exits (at once after a long life, else after 1 s doubling to 30 s); ``stop`` ends it
(SIGTERM, then SIGKILL). A child whose service is gone gets SIGTERM from the kernel and
ends.

Invariants
  - At most one child runs at a time; ``problem`` is None only while the last request to
    it was answered.
  - Its output goes where this process's goes (one log stream, as a container wants).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence

import httpx

from spark_offset_sidecar.adapters.child_process import SOCKET_ENV, Supervisor, exit_status
from spark_offset_sidecar.adapters.watcher.memory_update import encode_memory_update
from spark_offset_sidecar.errors import WatcherUnavailable
from spark_offset_sidecar.ports.watcher import (
    MEMORY_UPDATES,
    WATCHED_METRICS,
    Answer,
    MemoryUpdate,
)

log = logging.getLogger(__name__)

CHECK_EVERY = 5.0  # seconds between questions of whether the child is ready
PROBLEM = "watcher: "  # how the service names its watcher's problem among its own
FIRST_READY = 60.0  # seconds a starting service waits for its child to be ready
NOT_PASSED = "SIDECAR_"  # the settings' variables: the child is handed its service's
# What of the child's answer is passed on (its body comes decoded: no content-encoding).
ANSWER_HEADERS = ("content-type", "cache-control", "www-authenticate", "retry-after", "refresh")


class WatcherChild:
    def __init__(self, command: Sequence[str], brief: bytes, *, timeout: float = 30.0) -> None:
        """``command``: the watcher program (``child_command("watcher", ...)``); ``brief``:
        what it reads on its standard input (``app.watcher_brief``)."""
        self._command = tuple(command)
        self._brief = brief
        self._timeout = timeout
        self._folder: str | None = None  # the socket's, made at the first start
        self._client: httpx.AsyncClient | None = None
        self.supervisor: Supervisor | None = None
        self._problem: str | None = "the watcher is starting"

    @property
    def problem(self) -> str | None:
        return self._problem

    @property
    def generation(self) -> int:
        return self.supervisor.starts if self.supervisor is not None else 0

    async def start(self) -> None:
        if self.supervisor is None:  # the first start: the socket's folder, the client
            self._folder = tempfile.mkdtemp(prefix="offset-sidecar-")
            socket = os.path.join(self._folder, "watcher.sock")
            env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_PASSED)}
            env[SOCKET_ENV] = socket
            self.supervisor = Supervisor(
                "watcher", self._command, death_signal=signal.SIGTERM, env=env, given=self._brief
            )
            self._client = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=socket),
                base_url="http://watcher",
                timeout=self._timeout,
            )
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self._folder or "", "watcher.sock"))
        await self.supervisor.start()

    def _started(self) -> tuple[Supervisor, httpx.AsyncClient]:
        if self.supervisor is None or self._client is None:
            raise WatcherUnavailable(self._problem or "the watcher has not started")
        return self.supervisor, self._client

    async def first_ready(self) -> bool:
        """Wait until the child answers ready (True) or exits (False); the caller bounds
        the wait (``asyncio.timeout``)."""
        while self.supervisor is not None and self.supervisor.running:
            with contextlib.suppress(WatcherUnavailable):
                if (await self.get("/readyz", "", {})).status == 200:
                    return True
            await asyncio.sleep(0.1)
        return False

    async def run(self) -> None:
        """Ask the child whether it is ready every ``CHECK_EVERY`` seconds (``problem``), and
        start it again whenever it exits."""
        supervisor, _ = self._started()
        while True:
            ended = asyncio.ensure_future(supervisor.wait())
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

    async def get(self, path: str, query: str, headers: Mapping[str, str]) -> Answer:
        _, client = self._started()
        try:
            answer = await client.get(f"{path}?{query}" if query else path, headers=dict(headers))
        except httpx.HTTPError as exc:
            if self._problem is None:
                self._problem = f"the watcher does not answer: {exc!r}"
            raise WatcherUnavailable(self._problem) from None
        starting = answer.status_code == 503 and path == "/readyz"
        self._problem = "the watcher is starting" if starting else None
        kept = {k: answer.headers[k] for k in ANSWER_HEADERS if k in answer.headers}
        return Answer(answer.status_code, kept, answer.content)

    async def share(self) -> bytes:
        """Its share of ``/metrics``, gzip-compressed as it sent it (not inflated here)."""
        _, client = self._started()
        try:
            async with client.stream(
                "GET", WATCHED_METRICS, headers={"accept-encoding": "gzip"}
            ) as answer:
                body = b"".join([chunk async for chunk in answer.aiter_raw()])
        except httpx.HTTPError as exc:
            raise WatcherUnavailable(f"the watcher does not answer: {exc!r}") from None
        if answer.status_code != 200 or answer.headers.get("content-encoding") != "gzip":
            raise WatcherUnavailable(f"the watcher answered {answer.status_code}")
        return body

    async def tell(self, update: MemoryUpdate) -> None:
        _, client = self._started()
        await send_memory_update(client, update)
        self._problem = None

    async def stop(self) -> None:
        if self.supervisor is not None:
            await self.supervisor.stop()
        if self._client is not None:
            await self._client.aclose()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


async def send_memory_update(client: httpx.AsyncClient, update: MemoryUpdate) -> None:
    """``update`` to the watcher ``client`` reaches; ``WatcherUnavailable`` unless it took
    it."""
    body = await asyncio.to_thread(encode_memory_update, update)  # a whole fleet's: off the loop
    try:
        answer = await client.post(
            MEMORY_UPDATES, content=body, headers={"content-type": "application/octet-stream"}
        )
    except httpx.HTTPError as exc:
        raise WatcherUnavailable(f"the watcher does not answer: {exc!r}") from None
    if answer.status_code != 204:
        raise WatcherUnavailable(
            f"the watcher answered {answer.status_code} to a memory update: {answer.text[:200]}"
        )
