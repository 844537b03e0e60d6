"""The service as a real process (``offset-sidecar serve`` by default, its children with
it), for tests that kill it: this checkout's, or, given ``python``, the one installed in
that virtualenv (another release: ``harness.releases``)."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from harness.machine import free_port, stop_process
from harness.processes import children_running


class ServiceProcess:
    # Until /readyz answers 200: a start migrates, starts the watcher child (which waits for
    # its own first load) and loads the ledger; on a 2-core machine shared by a whole test
    # run, a replica's start was seen to take over 30 s.
    READY_SECONDS = 90.0

    def __init__(
        self,
        workdir: Path,
        bootstrap: str,
        port: int | None = None,
        command: str = "serve",
        python: Path | str | None = None,
        **settings: Any,
    ) -> None:
        self.workdir = workdir
        self.command = command
        self.python = str(python or sys.executable)
        self.port = port or free_port()
        self.env = {
            **os.environ,
            "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "SIDECAR_DATABASE_URL": f"sqlite:///{workdir / 'sidecar.db'}",
            "SIDECAR_HOST": "127.0.0.1",
            "SIDECAR_PORT": str(self.port),
            **{f"SIDECAR_{k.upper()}": str(v) for k, v in settings.items() if k != "test_ca"},
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / ("service.log" if command == "serve" else f"{command}.log")
        scheme = "https" if "tls_certfile" in settings else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        ca = settings.get("test_ca")
        verify = ssl.create_default_context(cafile=str(ca)) if ca else True
        self.http = httpx.Client(base_url=self.url, timeout=10, verify=verify)

    def start(self, **overrides: Any) -> ServiceProcess:
        self.env.update({f"SIDECAR_{k.upper()}": str(v) for k, v in overrides.items()})
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [self.python, "-m", "spark_offset_sidecar.cli", self.command],
                cwd=self.workdir,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"service exited: {self.log.read_text()[-2000:]}")
            try:
                if self.http.get("/readyz").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        stop_process(self.process)  # not left running behind the failure
        raise RuntimeError(f"service not ready: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)

    def processes(self) -> int:
        """The service's process and the watcher it started, if any: each holds Kafka
        clients of its own (its batches' writer, a child too, holds none)."""
        assert self.process is not None
        return 1 + len(children_running(self.process.pid, "watcher"))

    def post_progress(self, group: str, progress: dict[str, Any]) -> httpx.Response:
        return self.http.post("/v1/progress", json={"group_id": group, "progress": progress})

    def query(self, query_id: str) -> Any:
        return self.http.get(f"/v1/queries/{query_id}").json()

    def metrics(self) -> str:
        return self.http.get("/metrics").text
