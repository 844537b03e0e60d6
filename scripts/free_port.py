"""A TCP port on 127.0.0.1 for a server that binds it a few seconds from now.

``python3 scripts/free_port.py`` prints one. The port is bindable now and lies below the
kernel's ephemeral range (``net.ipv4.ip_local_port_range``), where nothing takes ports by
itself: a port the kernel handed to ``bind(("127.0.0.1", 0))`` is one it may hand again
to the next ``bind(0)`` or outgoing connection of any process (Spark's driver, its block
manager and py4j bind such ports as they start), and a broker whose JVM reaches its bind
seconds later would find it taken.
Standard library only: the scripts that start brokers use it with no environment.
"""

from __future__ import annotations

import random
import socket
from collections import deque
from pathlib import Path

LOWEST = 10000  # below: well-known and registered services' ports
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")

# Ports this process handed out lately and whose servers may not have bound them yet
# (``a, b = free_port(), free_port()`` never gives one port twice).
_recent: deque[int] = deque(maxlen=256)


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel picks from for ``bind(0)`` and outgoing connections."""
    try:
        low, high = RANGE_FILE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def bindable(port: int) -> bool:
    with socket.socket() as sock:  # no SO_REUSEADDR: a port in TIME_WAIT is not offered
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port nothing listens on, out of the kernel's way (any bindable port if the
    ephemeral range leaves no room below it)."""
    low, _ = ephemeral_range()
    candidates = list(range(LOWEST, low))
    random.shuffle(candidates)  # two processes asking at once seldom meet
    for port in candidates[:200]:
        if port not in _recent and bindable(port):
            _recent.append(port)
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
        return chosen


if __name__ == "__main__":
    print(free_port())
