"""This checkout and this machine: where the checkout is, local ports, child processes."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def answers(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port`` now."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def stop_process(process: subprocess.Popen[bytes] | None, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if ``process`` has not exited within ``grace`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
