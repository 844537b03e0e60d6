"""The service's child processes (the watcher, the writer: ``topology``): each run by one
``Supervisor`` (started, started again after a backoff, stopped, every exit logged), and
asked over one ``Channel``: the child's standard input and output, each message a pickle
of ``(number, message)`` after its length (docs/decisions.md, "One channel to each
child"; docs/run/processes.md). Both ends are this package; nothing else writes there.

A child calls ``die_with_parent`` first (Linux's ``PR_SET_PDEATHSIG``: the kernel sends it
``death_signal`` however the service ends), then makes its ``ChannelEnd``. The writer takes
SIGKILL (a transaction under way is rolled back, never committed behind the back of the
service's successor); the watcher SIGTERM (it stops as it would).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, SupportsIndex, cast

from spark_offset_sidecar.core.backoff import Backoff

log = logging.getLogger(__name__)

PARENT_ENV = "OFFSET_SIDECAR_PARENT"  # the pid whose end ends the child (not a setting)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
PROGRAM = "spark_offset_sidecar.child"  # the children's program (run as __main__)
ROLES = ("writer", "watcher")
RESTART_BACKOFF = Backoff(initial=1.0, cap=30.0)  # docs/run/processes.md
_LENGTH = struct.Struct(">I")


def child_command(role: str, level: str, log_format: str) -> tuple[str, ...]:
    """The command that starts child ``role`` of a service that logs at ``level`` in
    ``log_format`` (its ``LogSettings``, passed on: the writer imports no settings)."""
    if role not in ROLES:
        raise ValueError(f"no child {role!r}: {', '.join(ROLES)}")
    return (sys.executable, "-m", PROGRAM, role, level, log_format)


def exit_status(code: int | None) -> str:
    """``code`` as a person reads it: "exited with status 1", "was killed by SIGKILL"."""
    if code is None:
        return "is running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with status {code}"


class Supervisor:
    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        death_signal: signal.Signals,
        env: Mapping[str, str] | None = None,
        stop_grace: float = 10.0,
        backoff: Backoff = RESTART_BACKOFF,
        healthy: float = 60.0,
    ) -> None:
        """``env``: the child's environment (this process's by default), to which the
        parent's pid and ``death_signal`` are added. Its standard input and output are
        pipes to this process (its ``Channel``)."""
        self.name = name
        self.command = tuple(command)
        self.death_signal = death_signal
        self._env = dict(os.environ if env is None else env)
        self._stop_grace = stop_grace
        self._backoff = backoff
        self._healthy = healthy
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0
        self._young_deaths = 0  # in a row
        self._started_at = 0.0
        self._seen_end: asyncio.subprocess.Process | None = None
        self._stopping = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> asyncio.subprocess.Process:
        if self.running:
            raise RuntimeError(f"the {self.name} is running")
        if self._young_deaths:
            delay = self._backoff.delay(self._young_deaths)
            log.info("starting the %s again in %.0f s", self.name, delay)
            await asyncio.sleep(delay)
        env = {**self._env, PARENT_ENV: f"{os.getpid()}:{int(self.death_signal)}"}
        pipe = asyncio.subprocess.PIPE
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: _Pipes(loop), *self.command, env=env, stdin=pipe, stdout=pipe
        )
        # As ``create_subprocess_exec`` makes it, but for its output (``ChildOutput``).
        self.process = asyncio.subprocess.Process(cast(Any, transport), protocol, loop)
        self._started_at = asyncio.get_running_loop().time()
        self.starts += 1
        log.info("%s started (pid %d)", self.name, self.process.pid)
        return self.process

    async def wait(self) -> int:
        """Wait until the running child ends; the first to see it logs how, and sets the
        next start's backoff."""
        process = self.process
        assert process is not None, "start() first"
        code = await process.wait()
        if self._seen_end is not process:
            self._seen_end = process
            lived = asyncio.get_running_loop().time() - self._started_at
            self._young_deaths = 0 if lived >= self._healthy else self._young_deaths + 1
            level = logging.INFO if self._stopping else logging.WARNING
            log.log(level, "%s (pid %d) %s", self.name, process.pid, exit_status(code))
        return code

    async def kill(self) -> int | None:
        """End the running child now (SIGKILL); its exit code, None if none ran."""
        if self.process is None:
            return None
        _end(self.process, signal.SIGKILL)
        return await self.wait()

    async def stop(self) -> None:
        """SIGTERM (and its input closed), then SIGKILL after ``stop_grace`` seconds."""
        process = self.process
        if process is None:
            return
        self._stopping = True
        _end(process, signal.SIGTERM)
        try:
            async with asyncio.timeout(self._stop_grace):
                await self.wait()
        except TimeoutError:
            log.warning("%s (pid %d) did not stop in time", self.name, process.pid)
            await self.kill()


def _end(process: asyncio.subprocess.Process, sent: signal.Signals) -> None:
    """Close the child's input and send it ``sent`` if it still runs."""
    if process.stdin is not None:
        process.stdin.close()
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sent)


class ChildGone(ConnectionError):
    """The child ended, or closed its output, before it answered."""


def frame(message: object) -> bytes:
    """One message as the channel carries it (its length, then its pickle)."""
    data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


class ChildOutput(asyncio.StreamReader):
    """A child's standard output, read as frames: each whole one is handed to its channel
    from the loop's callback that read it, so that the caller waiting for the reply runs
    in the same turn of the loop (docs/decisions.md, "A child's reply in the same turn")."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._data = bytearray()
        self._on_frame: Callable[[Any], None] | None = None
        self._on_end: Callable[[BaseException | None], None] | None = None
        self._end: tuple[BaseException | None] | None = None

    def deliver(
        self, on_frame: Callable[[Any], None], on_end: Callable[[BaseException | None], None]
    ) -> None:
        """Hand each frame to ``on_frame`` (those already read at once), and the output's
        end to ``on_end``: None at its end, or the error that ended the reading."""
        self._on_frame, self._on_end = on_frame, on_end
        self._frames()
        if self._end is not None:
            on_end(self._end[0])

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        self._data.extend(data)
        self._frames()

    def feed_eof(self) -> None:
        super().feed_eof()
        self._ended(None)

    def set_exception(self, exc: Exception) -> None:
        super().set_exception(exc)
        self._ended(exc)

    def _frames(self) -> None:
        data = self._data
        while self._on_frame is not None and self._end is None and len(data) >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(data)
            end = _LENGTH.size + size
            if len(data) < end:
                return
            body = bytes(memoryview(data)[_LENGTH.size : end])
            del data[:end]
            try:
                self._on_frame(pickle.loads(body))
            except Exception as exc:
                log.exception("a child's reply could not be read: its channel is closed")
                self._ended(exc)
                return

    def _ended(self, exc: BaseException | None) -> None:
        if self._end is None:
            self._end = (exc,)
            if self._on_end is not None:
                self._on_end(exc)


class _Pipes(asyncio.subprocess.SubprocessStreamProtocol):
    """``create_subprocess_exec``'s protocol, its output a ``ChildOutput``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)
        self._for_output = loop

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        output = cast(asyncio.SubprocessTransport, transport).get_pipe_transport(1)
        if output is not None:
            self.stdout = ChildOutput(self._for_output)
            self.stdout.set_transport(output)


class Channel:
    """The parent's side of a running child's channel."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None, "a Supervisor's child: its input a pipe"
        assert isinstance(process.stdout, ChildOutput), "its output a Supervisor's pipe"
        self._sink = process.stdin
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._numbers = itertools.count()
        self._ended = False
        process.stdout.deliver(self._received, self._end)

    async def ask(self, request: object) -> Any:
        """``request``'s reply; ``ChildGone`` if the child ends first. Cancelled, the
        request may still be handled; its reply is dropped."""
        if self._ended or self._sink.is_closing():
            raise ChildGone("the child has ended")
        number = next(self._numbers)
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[number] = reply
        try:
            self._sink.write(frame((number, request)))
            await self._sink.drain()
            return await reply
        except ConnectionError as exc:  # the pipe broken: the child is gone
            raise ChildGone(f"the child has ended: {exc!r}") from None
        finally:
            self._waiting.pop(number, None)

    def _received(self, frame: tuple[int, Any]) -> None:
        number, message = frame
        reply = self._waiting.get(number)
        if reply is not None and not reply.done():
            reply.set_result(message)

    def _end(self, _: BaseException | None) -> None:
        """Its output ended (or could not be read): every request waiting is refused."""
        self._ended = True
        for reply in self._waiting.values():
            if not reply.done():
                reply.set_exception(ChildGone("the child ended before it answered"))


class ChannelEnd:
    """A child's side of its channel: requests read from its standard input, replies
    written to its standard output, from any thread. Made first: from then on what the
    child prints goes to standard error, never into the channel."""

    def __init__(self) -> None:
        self._source = sys.stdin.fileno()
        self._sink = os.dup(sys.stdout.fileno())
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        self._writing = threading.Lock()

    def requests(self) -> Iterator[tuple[int, Any]]:
        """Each request and its number, as they come, until the input closes."""
        while (head := self._read(_LENGTH.size)) is not None:
            body = self._read(_LENGTH.unpack(head)[0])
            if body is None:
                return
            yield pickle.loads(body)

    def reply(self, number: int, message: object) -> None:
        data = memoryview(frame((number, message)))
        with self._writing:
            while data:
                data = data[os.write(self._sink, data) :]

    def _read(self, size: int) -> bytes | None:
        """Exactly ``size`` bytes (unbuffered: a request is never read ahead), None at
        the end of the input."""
        chunks = []
        while size:
            chunk = os.read(self._source, size)
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


def die_with_parent() -> None:
    """In a child: ask the kernel for the signal its supervisor chose when the parent ends
    (``PARENT_ENV``); end at once if the parent has already ended."""
    given = os.environ.get(PARENT_ENV)
    if given is None:
        return
    parent, _, number = given.partition(":")
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(number or signal.SIGKILL), 0, 0, 0)
    if os.getppid() != int(parent):  # it died before the signal was asked for
        os._exit(1)
