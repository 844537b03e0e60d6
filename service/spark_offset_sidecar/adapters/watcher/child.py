"""``offset-sidecar watch`` as a child of the process that takes events
(``SIDECAR_WATCHER=child``), reached over a Unix socket of its own.

The child reads the same environment (the same settings: database, Kafka, tokens) and
listens on ``SOCKET_ENV``'s socket instead of a port (a replica's child is told which
replica it publishes as, with what else it is told). ``start`` spawns it; ``run`` starts
it again whenever it exits (after 1 s, doubling up to 30 s while it keeps dying); ``stop``
ends it (SIGTERM, then SIGKILL after ``STOP_GRACE`` seconds). A child whose parent is gone
ends itself (``PARENT_ENV``: ``cli`` watches it), so that a killed service leaves no
watcher behind.

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
import sys
import tempfile
from collections.abc import Mapping

import httpx

from spark_offset_sidecar.adapters.watcher.told import send_told
from spark_offset_sidecar.errors import WatcherUnavailable
from spark_offset_sidecar.ports.watcher import WATCHED_METRICS, Answer, Told

log = logging.getLogger(__name__)

SOCKET_ENV = "OFFSET_SIDECAR_WATCHER_SOCKET"  # where the child listens (not a setting)
PARENT_ENV = "OFFSET_SIDECAR_WATCHER_PARENT"  # the pid whose end ends the child
STOP_GRACE = 10.0
CHECK_EVERY = 5.0  # seconds between questions of whether the child is ready
PROBLEM = "watcher: "  # how the service names its watcher's problem among its own
FIRST_READY = 60.0  # seconds a starting service waits for its child to be ready
# What the child's environment leaves out: it serves plain HTTP on its socket.
NOT_PASSED = ("SIDECAR_TLS_CERTFILE", "SIDECAR_TLS_KEYFILE")
# What of the child's answer is passed on (its body comes decoded: no content-encoding).
ANSWER_HEADERS = ("content-type", "cache-control", "www-authenticate", "retry-after", "refresh")


class WatcherChild:
    def __init__(self, *, timeout: float = 30.0, first_delay: float = 1.0) -> None:
        self._timeout = timeout
        self._first_delay = first_delay
        self._folder: str | None = None
        self._client: httpx.AsyncClient | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0
        self._problem: str | None = "the watcher is starting"

    @property
    def problem(self) -> str | None:
        return self._problem

    @property
    def generation(self) -> int:
        return self.starts

    async def start(self) -> None:
        if self._folder is None:  # the first start: the socket's folder, and the client
            self._folder = tempfile.mkdtemp(prefix="offset-sidecar-")
            self._client = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=self._socket()),
                base_url="http://watcher",
                timeout=self._timeout,
            )
        socket = self._socket()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket)
        env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
        env.update({SOCKET_ENV: socket, PARENT_ENV: str(os.getpid())})
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "spark_offset_sidecar.cli", "watch", env=env
        )
        self.starts += 1
        log.info("watcher started (pid %d)", self.process.pid)

    def _socket(self) -> str:
        assert self._folder is not None
        return os.path.join(self._folder, "watcher.sock")

    async def first_ready(self) -> bool:
        """Wait until the child answers ready (True) or exits (False); the caller bounds
        the wait (``asyncio.timeout``)."""
        while self.process is not None and self.process.returncode is None:
            with contextlib.suppress(WatcherUnavailable):
                if (await self.get("/readyz", "", {})).status == 200:
                    return True
            await asyncio.sleep(0.1)
        return False

    async def run(self) -> None:
        """Ask the child whether it is ready every ``CHECK_EVERY`` seconds (``problem``), and
        start it again whenever it exits."""
        delay = self._first_delay
        loop = asyncio.get_running_loop()
        while True:
            process = self.process
            assert process is not None, "start() first"
            started = loop.time()
            while True:
                try:
                    code = await asyncio.wait_for(asyncio.shield(process.wait()), CHECK_EVERY)
                    break
                except TimeoutError:
                    with contextlib.suppress(WatcherUnavailable):
                        await self.get("/readyz", "", {})
            self._problem = f"the watcher exited ({code}); starting it again"
            log.warning("the watcher exited with %s: starting it again in %.0f s", code, delay)
            await asyncio.sleep(delay)
            lived = loop.time() - started
            delay = self._first_delay if lived > 60 else min(30.0, delay * 2)
            await self.start()

    async def get(self, path: str, query: str, headers: Mapping[str, str]) -> Answer:
        if self._client is None:
            raise WatcherUnavailable(self._problem or "the watcher has not started")
        try:
            answer = await self._client.get(
                f"{path}?{query}" if query else path, headers=dict(headers)
            )
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
        if self._client is None:
            raise WatcherUnavailable(self._problem or "the watcher has not started")
        try:
            async with self._client.stream(
                "GET", WATCHED_METRICS, headers={"accept-encoding": "gzip"}
            ) as answer:
                body = b"".join([chunk async for chunk in answer.aiter_raw()])
        except httpx.HTTPError as exc:
            raise WatcherUnavailable(f"the watcher does not answer: {exc!r}") from None
        if answer.status_code != 200 or answer.headers.get("content-encoding") != "gzip":
            raise WatcherUnavailable(f"the watcher answered {answer.status_code}")
        return body

    async def tell(self, told: Told) -> None:
        if self._client is None:
            raise WatcherUnavailable(self._problem or "the watcher has not started")
        await send_told(self._client, told)
        self._problem = None

    async def stop(self) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._client is not None:
            await self._client.aclose()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
