"""Shared pieces of the Spark benchmarks: a producer, a service process, percentiles."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from harness.machine import ROOT, free_port


def percentiles(values: list[float]) -> tuple[float, float, float]:
    """(p50, p99, mean) of ``values``."""
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return statistics.median(ordered), p99, statistics.fmean(ordered)


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


def produce_in_background(
    bootstrap: str, topic: str, rate: float, seconds: float
) -> threading.Thread:
    async def produce() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        started, sent = time.monotonic(), 0
        try:
            while (elapsed := time.monotonic() - started) < seconds:
                target = int(elapsed * rate)
                while sent < target:
                    await producer.send(topic, b"x" * 100)
                    sent += 1
                await asyncio.sleep(0.01)
            await producer.flush()
        finally:
            await producer.stop()

    thread = threading.Thread(target=lambda: asyncio.run(produce()), daemon=True)
    thread.start()
    return thread


class Sidecar:
    """``offset-sidecar serve`` on a free port with a throw-away SQLite database; from
    ``source``'s ``service/`` folder (another checkout, e.g. a ``git worktree`` of an
    earlier commit) instead of this one's when given."""

    def __init__(self, bootstrap: str, source: Path | None = None, **settings: object) -> None:
        self.folder = tempfile.mkdtemp(prefix="sidecar-bench-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "SIDECAR_DATABASE_URL": f"sqlite:///{self.folder}/sidecar.db",
            "SIDECAR_PORT": str(self.port),
            "SIDECAR_LOG_LEVEL": "WARNING",
            **{f"SIDECAR_{k.upper()}": str(v) for k, v in settings.items()},
        }
        if source is not None:  # ahead of the virtualenv's editable install of this one
            env["PYTHONPATH"] = str(source / "service")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "spark_offset_sidecar.cli", "serve"], env=env, cwd=ROOT
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the sidecar did not start")

    def post(self, path: str, body: object) -> object:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def get(self, path: str) -> object:
        with urllib.request.urlopen(self.url + path, timeout=30) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
