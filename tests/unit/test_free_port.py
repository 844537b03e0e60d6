"""The port a test server is given is out of the kernel's way until the server binds it."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.machine import PORT_LEDGER, ROOT, free_port


def test_the_port_is_free_and_below_the_ephemeral_range() -> None:
    low, _ = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    if low < 11000:
        pytest.skip(f"this machine's ephemeral range starts at {low}: no room below it")
    for _ in range(50):
        port = free_port()
        assert 10000 <= port < low, (port, low)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: it binds


def test_a_port_taken_is_never_given() -> None:
    held = []
    try:
        for _ in range(30):
            sock = socket.socket()
            sock.bind(("127.0.0.1", free_port()))
            sock.listen()
            held.append(sock)
        ports = [s.getsockname()[1] for s in held]
        assert len(set(ports)) == len(ports)
    finally:
        for sock in held:
            sock.close()


def test_ports_given_one_after_the_other_differ_before_anything_binds_them() -> None:
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)


def test_a_port_handed_to_another_process_is_not_handed_here_before_it_binds() -> None:
    # Test workers and scripts each pick at random among ~22,000 ports: 300 picks on each
    # side would meet with a probability of ~98% if nothing were shared between processes.
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "from free_port import free_port; print(*(free_port() for _ in range(300)))",
        ],
        cwd=ROOT / "scripts",
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = set(map(int, other.stdout.split()))
    mine = {free_port() for _ in range(300)}
    assert len(theirs) == len(mine) == 300
    assert not theirs & mine


def test_every_user_of_the_machine_can_write_the_ledger() -> None:
    free_port()  # the demo runs as a user who is not root, beside the tests' own ports
    assert PORT_LEDGER.stat().st_mode & 0o777 == 0o666
