"""A client's keep-alive connection outlives the pause between a job's events: the service
keeps an idle connection open ``SIDECAR_KEEP_ALIVE_SECONDS`` (620 s), longer than the
clients and proxies that pool connections keep theirs, so that they close it first. With
uvicorn's own 5 s, a connection closed here just as a job's next event was on its way
failed that event with a reset (seen at 1 in 10,000 events by bench replica_watchers)."""

from __future__ import annotations

import http.client
import time
from pathlib import Path

import pytest

from harness.service_process import ServiceProcess


def _livez(connection: http.client.HTTPConnection) -> int:
    connection.request("GET", "/livez")
    answer = connection.getresponse()
    answer.read()
    return answer.status


def test_an_idle_connection_is_kept_past_uvicorns_five_seconds(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    service = ServiceProcess(tmp_path, kafka_bootstrap).start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
        assert _livez(connection) == 200
        port = connection.sock.getsockname()[1]
        time.sleep(6)  # idle past uvicorn's default
        assert _livez(connection) == 200
        assert connection.sock.getsockname()[1] == port, "the same connection"
        connection.close()
    finally:
        service.stop()


def test_the_keep_alive_setting_is_the_servers(tmp_path: Path, kafka_bootstrap: str) -> None:
    """Set to 1 s, the service closes a connection idle for 2 s (so the setting above is
    what keeps it open)."""
    service = ServiceProcess(tmp_path, kafka_bootstrap, keep_alive_seconds=1).start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
        assert _livez(connection) == 200
        time.sleep(2.5)
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _livez(connection)
        connection.close()
    finally:
        service.stop()
