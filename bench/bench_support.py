"""What every benchmark shares: the service as a process (``Sidecar``), the bare FastAPI
baseline (``Bare``), the Go load generator (``load``), a producer, percentiles. Kafka comes from
``python -m bench`` (a brand-new broker) or ``--bootstrap``; figures are printed by
``bench.figures``."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.figures import run_child, run_children
from harness.machine import ROOT, free_port
from harness.service_process import ServiceProcess


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


class LogEndMover:
    """Log ends that move all the time: ``rate`` records a second, one at a time to every
    partition of ``topics`` in turn, from a thread of this process (its CPU is the
    bench's), until ``stop``."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, rate: float) -> None:
        self.bootstrap, self.rate = bootstrap, rate
        self.targets = [(topic, p) for p in range(partitions) for topic in topics]
        self.sent = 0
        self.failed = 0  # records the broker did not take (a new broker is slow at first)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=20)
        await producer.start()
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                target = int((time.monotonic() - started) * self.rate)
                while self.sent < target:
                    topic, partition = self.targets[self.sent % len(self.targets)]
                    delivery = await producer.send(topic, b"x" * 100, partition=partition)
                    delivery.add_done_callback(self._delivered)
                    self.sent += 1
                await asyncio.sleep(0.01)
            await producer.flush()
        finally:
            await producer.stop()

    def _delivered(self, delivery: asyncio.Future[object]) -> None:
        if not delivery.cancelled() and delivery.exception() is not None:
            self.failed += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


@contextmanager
def worktree(rev: str, folder: str | Path) -> Iterator[Path]:
    """Commit ``rev`` checked out in ``folder``/before (a ``git worktree``, removed after):
    a benchmark's "before" side runs its ``service/`` (``Sidecar(source=...)``)."""
    tree = Path(folder) / "before"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(tree), rev],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)


def own_migrations(source: Path) -> None:
    """``source``'s package runs its own migrations: this checkout's editable install maps
    ``spark_offset_sidecar.migrations`` onto this checkout's ``migrations/``, found after
    the package's own folder (0.2.0 on 0.3.0's migrations fails to start), so the
    package of a checkout, a worktree or a release's cached source gets a link to its
    own."""
    link = source / "service" / "spark_offset_sidecar" / "migrations"
    if source.resolve() != ROOT.resolve() and not link.exists():
        link.symlink_to(source / "migrations")


class Sidecar:
    """``offset-sidecar serve`` on a free port with a throw-away SQLite database; from
    ``source``'s ``service/`` folder (another checkout, e.g. a ``git worktree`` of an
    earlier commit) instead of this one's when given."""

    def __init__(
        self,
        bootstrap: str,
        source: Path | None = None,
        *,
        command: str = "serve",
        folder: str | None = None,
        owns_folder: bool | None = None,
        **settings: object,
    ) -> None:
        """``command``: ``serve``, or ``watch`` (a watcher); ``folder``: where its SQLite
        database is (another one's: a watcher of that service, or a stopped service's
        restarted), a new one by default. ``stop`` removes the folder if this one owns it:
        by default, one it made."""
        self.folder = folder or tempfile.mkdtemp(prefix="sidecar-bench-")
        self.owns_folder = folder is None if owns_folder is None else owns_folder
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
            own_migrations(source)
        self.log = Path(self.folder) / f"{command}.log"  # its log, read when a run fails
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "spark_offset_sidecar.cli", command],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        # As long as the tests' services are given: a start from an earlier commit's tree
        # compiles its modules first, and took over 30 s beside a whole test run.
        deadline = time.monotonic() + ServiceProcess.READY_SECONDS
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the sidecar did not start; {self.log_tail(1500)}")

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

    def log_tail(self, size: int = 4000) -> str:
        """The end of the service's log, and how it ended if it did."""
        ended = self.process.poll()
        text = self.log.read_text(errors="replace")[-size:]
        return f"service {'exited ' + str(ended) if ended is not None else 'running'}:\n{text}"

    def stop(self, *, keep_folder: bool = False) -> None:
        """End the process; remove its folder (database and log) if it owns it, unless
        ``keep_folder`` (to be restarted on it)."""
        self.process.terminate()
        self.process.wait(30)
        if self.owns_folder and not keep_folder:
            shutil.rmtree(self.folder, ignore_errors=True)


LOADGEN = ROOT / ".local" / "bin" / "loadgen"


def build_loadgen() -> Path:
    LOADGEN.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "build", "-o", str(LOADGEN), "."], cwd=ROOT / "bench" / "loadgen", check=True
    )
    return LOADGEN


class Bare:
    """``bench/bare_endpoint.py`` as a process (``json_only``: its json-only variant)."""

    def __init__(self, *, json_only: bool = False) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        variant = ["--json-only"] if json_only else []
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "bare_endpoint.py"), str(self.port), *variant]
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def load(
    url: str,
    args: argparse.Namespace,
    first_batch: int,
    *,
    allow_errors: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """Run the load generator against ``url`` (several: comma-separated, round robin);
    failed events end the benchmark unless ``allow_errors`` (they are then a figure). Its
    own CPU is ``loadgen_cpu_s``."""
    endpoints = ",".join(f"{base}/v1/progress" for base in url.split(","))
    command = [
        str(LOADGEN),
        f"-url={endpoints}",
        f"-queries={args.queries}",
        f"-partitions={args.partitions}",
        f"-first-batch={first_batch}",
        f"-workers={args.workers}",
    ] + [f"-{k}={v}" for k, v in extra.items()]
    done, cpu = run_child(command, capture_output=True)
    result: dict[str, Any] = json.loads(done.stdout)
    result["loadgen_cpu_s"] = cpu
    if (result["errors"] or result["non_2xx"]) and not allow_errors:
        raise SystemExit(f"{url}: failures during the run: {result}")
    return result


WRK_SCRIPT = ROOT / "bench" / "wrk" / "progress.lua"


def wrk(
    urls: list[str],
    *,
    seconds: float,
    topic: str,
    queries: int,
    partitions: int,
    run: str,
    connections: int = 32,
    rate: int = 0,
) -> dict[str, Any]:
    """``wrk`` with ``bench/wrk/progress.lua`` (Spark-shaped progress bodies, every request a
    new batch of its query, each query's batches in order) against each of ``urls`` at
    once, each with its share of the queries and connections; closed loop, or ``rate``
    events/s on a fixed schedule. The runs summed, and wrk's own CPU (``wrk_cpu_s``)."""
    share = queries // len(urls)
    threads = 2 if len(urls) == 1 else 1
    commands, environments = [], []
    for index, url in enumerate(urls):
        environments.append({
            **os.environ, "TOPIC": topic, "QUERIES": str(share), "QUERY_BASE": str(index * share),
            "PARTITIONS": str(partitions), "RATE": str(rate), "RUN": run, "THREADS": str(threads),
        })  # fmt: skip
        commands.append([
            "wrk", f"-t{threads}", f"-c{connections // len(urls)}", f"-d{round(seconds)}s",
            "--latency", "-s", str(WRK_SCRIPT), url,
        ])  # fmt: skip
    outputs, cpu = run_children(commands, environments)
    summaries = [_wrk_summary(out) for out in outputs]
    total: dict[str, Any] = dict(summaries[0])
    for key in ("requests", "accepted", "non2xx", "socket_errors"):
        total[key] = sum(s[key] for s in summaries)
    total["seconds"] = max(s["seconds"] for s in summaries)
    if len(urls) > 1:  # percentiles of separate runs do not add up
        total.update(p50_ms=None, p99_ms=None, max_ms=max(s["max_ms"] for s in summaries))
    total["errors"] = total["non2xx"] + total["socket_errors"]
    total["events_per_s"] = total["requests"] / total["seconds"]
    total["wrk_cpu_s"] = cpu
    return total


def _wrk_summary(out: str) -> dict[str, Any]:
    """The JSON line that ``bench/wrk/progress.lua`` prints when wrk is done."""
    summary = [line for line in out.splitlines() if line.startswith("{")]
    if not summary:
        raise RuntimeError(f"wrk printed no summary:\n{out}")
    result: dict[str, Any] = json.loads(summary[-1])
    return result


def spark_pid(spark: Any) -> int | None:
    """The pid of the JVM behind a classic PySpark session this process launched (its CPU
    is a side of its own); None when there is none here."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    return getattr(getattr(gateway, "proc", None), "pid", None)


def module_at(rev: str, path: str, folder: Path) -> ModuleType:
    """The module at ``path`` (in the checkout) as it was at ``rev``, loaded from a copy in
    ``folder``; its own imports come from this checkout."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    name = Path(path).stem + "_before"
    copy = folder / f"{name}.py"
    copy.write_text(source)
    spec = importlib.util.spec_from_file_location(name, copy)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
