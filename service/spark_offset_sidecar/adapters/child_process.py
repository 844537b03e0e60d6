"""The service's child processes (the watcher, the writer: ``topology``), each run by one
``Supervisor``: started, ended with the service, started again with a backoff, stopped in
order, every exit logged with its status.

    child = Supervisor("watcher", command, death_signal=signal.SIGTERM)
    await child.start()        # after the backoff, if the last one died young
    code = await child.wait()  # it ended: logged ("watcher (pid 7) was killed by SIGKILL")
    await child.stop()         # SIGTERM (its input closed), SIGKILL after ``stop_grace``

What a child is ``given`` (the watcher's brief) is written to its standard input at each
start.

The child's own side is ``die_with_parent``, which each child program calls first: the
kernel sends the child ``death_signal`` when the service ends, however it ends (Linux's
``PR_SET_PDEATHSIG``), and a child whose service ended before that was set ends at once.
The writer takes SIGKILL (a transaction under way is rolled back, never committed behind
the back of the service's successor); the watcher SIGTERM (it stops as it would).

Invariants
  - At most one process per supervisor runs at a time; ``start`` while one runs raises.
  - The backoff: no wait for the first start, nor after a child that lived ``healthy``
    seconds; after one that died younger, ``backoff``'s (1 s doubling up to 30 s).
  - A child's output goes where the service's goes (one log stream, as a container wants).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence

from spark_offset_sidecar.core.backoff import Backoff

log = logging.getLogger(__name__)

PARENT_ENV = "OFFSET_SIDECAR_PARENT"  # the pid whose end ends the child (not a setting)
SOCKET_ENV = "OFFSET_SIDECAR_WATCHER_SOCKET"  # where the watcher listens (not a setting)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
PROGRAM = "spark_offset_sidecar.child"  # the children's program (run as __main__)
ROLES = ("writer", "watcher")
RESTART_BACKOFF = Backoff(initial=1.0, cap=30.0)  # docs/run/processes.md


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
        pipes: bool = False,
        given: bytes | None = None,
        stop_grace: float = 10.0,
        backoff: Backoff = RESTART_BACKOFF,
        healthy: float = 60.0,
    ) -> None:
        """``pipes``: the child's standard input and output are pipes to this process
        (else it shares this process's); ``given``: what each child started reads on its
        standard input, which is then closed; ``env``: its environment (this process's by
        default), to which the parent's pid and ``death_signal`` are added."""
        self.name = name
        self.command = tuple(command)
        self.death_signal = death_signal
        self._env = dict(os.environ if env is None else env)
        self._pipes = pipes
        self._given = given
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
        pipe = asyncio.subprocess.PIPE if self._pipes else None
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            env=env,
            stdin=pipe if self._given is None else asyncio.subprocess.PIPE,
            stdout=pipe,
        )
        if self._given is not None and self.process.stdin is not None:
            self.process.stdin.write(self._given)
            with contextlib.suppress(ConnectionError):  # it ended: ``wait`` says how
                await self.process.stdin.drain()
            self.process.stdin.close()
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
        process = self.process
        if process is None:
            return None
        if process.stdin is not None:
            process.stdin.close()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        return await self.wait()

    async def stop(self) -> None:
        """SIGTERM (and its input closed), then SIGKILL after ``stop_grace`` seconds."""
        process = self.process
        if process is None:
            return
        self._stopping = True
        if process.stdin is not None:
            process.stdin.close()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        try:
            async with asyncio.timeout(self._stop_grace):
                await self.wait()
        except TimeoutError:
            log.warning("%s (pid %d) did not stop in time", self.name, process.pid)
            await self.kill()


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
