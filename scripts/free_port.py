"""A TCP port on 127.0.0.1 for a server that binds it a few seconds from now.

``python3 scripts/free_port.py`` prints one. The port is bindable now and lies below the
kernel's ephemeral range (``net.ipv4.ip_local_port_range``), where nothing takes ports by
itself: a port the kernel handed to ``bind(("127.0.0.1", 0))`` is one it may hand again
to the next ``bind(0)`` or outgoing connection of any process (Spark's driver, its block
manager and py4j bind such ports as they start), and a broker whose JVM reaches its bind
seconds later would find it taken. A port handed out is written down machine-wide for a few
minutes, so that no other process (another test worker, a nested suite, a script calling
this file) is handed it before its server binds.
Standard library only: the scripts that start brokers use it with no environment.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

LOWEST = 10000  # below: well-known and registered services' ports
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")

# Ports handed out by any process of this machine within HELD_FOR seconds, whose servers
# may not have bound them yet: one "port handed-out-at" line each, read and rewritten
# under an exclusive flock, so two processes asking at once are never given one port.
# Every user of the machine shares it (the tests run the demo as a user who is not root).
LEDGER = Path(tempfile.gettempdir()) / "spark-offset-sidecar-ports"
HELD_FOR = 300.0


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


def _handed_out(text: str, now: float) -> dict[int, float]:
    """The ledger's ports still held at ``now`` (a line that does not parse is dropped)."""
    held: dict[int, float] = {}
    for line in text.splitlines():
        try:
            port, at = line.split()
            if now - float(at) < HELD_FOR:
                held[int(port)] = float(at)
        except ValueError:
            continue
    return held


def _open_ledger() -> IO[str]:
    """The shared ledger, read-write for every user: created 0666 by whoever comes first.
    An existing file is opened without O_CREAT, which Linux refuses in a sticky /tmp for
    a file of another user (``fs.protected_regular``). If this user cannot write it, a
    ledger of this user's own: ports stay apart among this user's processes at least."""
    try:
        ledger = open(LEDGER, "r+")  # noqa: SIM115  (the caller closes it)
    except FileNotFoundError:
        pass
    except PermissionError:
        return open(f"{LEDGER}-{os.getuid()}", "a+")
    else:
        if os.fstat(ledger.fileno()).st_uid == os.getuid():
            os.fchmod(ledger.fileno(), 0o666)  # one made by an earlier version was 0644
        return ledger
    try:
        descriptor = os.open(LEDGER, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:  # another process created it meanwhile
        return _open_ledger()
    os.fchmod(descriptor, 0o666)  # whatever the umask
    return os.fdopen(descriptor, "r+")


def _random_order(low: int, high: int) -> Iterator[int]:
    """Every port of ``range(low, high)`` once, in random order, drawn as they are asked
    for: a few random draws, then (a crowded range) the rest shuffled."""
    tried: set[int] = set()
    for _ in range(64):
        port = random.randrange(low, high)
        if port not in tried:
            tried.add(port)
            yield port
    rest = [p for p in range(low, high) if p not in tried]
    random.shuffle(rest)
    yield from rest


def free_port() -> int:
    """A port nothing listens on and no process of this machine was handed lately, out of
    the kernel's way (any bindable port if the ephemeral range leaves no room below it)."""
    low, _ = ephemeral_range()
    candidates = _random_order(LOWEST, low)
    with _open_ledger() as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)  # released when the file closes
        ledger.seek(0)
        now = time.time()
        held = _handed_out(ledger.read(), now)
        chosen = next((p for p in candidates if p not in held and bindable(p)), None)
        if chosen is None:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                chosen = int(sock.getsockname()[1])
        held[chosen] = now
        ledger.seek(0)
        ledger.truncate()
        ledger.write("".join(f"{port} {at}\n" for port, at in held.items()))
        return chosen


if __name__ == "__main__":
    print(free_port())
