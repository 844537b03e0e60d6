"""This checkout and this machine: where the checkout is, and a free local port."""

from __future__ import annotations

import socket
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
