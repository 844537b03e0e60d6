"""This checkout and this machine: where the checkout is, local ports, child processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent  # the checkout

# The scripts' own helpers (standard library only), shared with the shell scripts.
sys.path.insert(0, str(ROOT / "scripts"))
from free_port import LEDGER as PORT_LEDGER  # noqa: E402, F401  (ports handed out lately)
from free_port import free_port as free_port  # noqa: E402  (one way to pick a port)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Held by one process at a time, across processes: an exclusive flock on ``path``."""
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def machine_lock(name: str) -> contextlib.AbstractContextManager[None]:
    """Held by one process of this machine at a time (every test run and xdist worker):
    for what they all share and cannot choose, such as a fixed port."""
    return file_lock(Path(tempfile.gettempdir()) / f"spark-offset-sidecar-{name}.lock")


def answers(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port`` now."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def answers_http(url: str) -> bool:
    """Whether an HTTP GET of ``url`` succeeds now (2xx, or a redirect followed to one)."""
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except OSError:
        return False
    return True


def wait_answering(
    answering: Callable[[], bool], process: subprocess.Popen[bytes], what: str, timeout: float
) -> None:
    """Until ``answering()`` says the server ``process`` started is up; ``RuntimeError``
    naming ``what`` if the process exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        if answering():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer within {timeout:.0f} s")


def stop_process(process: subprocess.Popen[Any] | None, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if ``process`` has not exited within ``grace`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def refuse_in_inner_loop(what: str) -> None:
    """``make check`` (``INNER_LOOP=1``) runs only tests that need nothing but the
    virtualenv: one that reaches for a broker, Spark, a container or a program of the
    machine anyway lacks its marker, and says so."""
    if os.environ.get("INNER_LOOP") == "1":
        raise RuntimeError(
            f"this test {what}, but `make check` runs with the virtualenv alone: mark it "
            "(pytest.mark.kafka, .spark, .container or .tools; see CONTRIBUTING.md)"
        )
