"""Both ways of attaching a job, on every Spark that users run. A real job, in a driver
that is a clean environment with only pyspark and, for the listener, the listener's wheel
(Spark's Kafka connector of that version from Maven Central), reads a real topic, and the
service commits the group exactly to the topic's end once the job restarts on the same
checkpoint. Each run is seen both ways at once, by two services, each with a
group of its own: one the job's listener reports to, one that follows the job's
checkpoint folder (for it, the job has no listener at all). The query first runs with
the listener's service down (its address refuses connections): Spark finishes every batch
all the same; the service then comes up on that address and the query starts again on the
same checkpoint, in the same driver: it goes on with the query's batch ids and is
committed to the end. Two runs of the query a case, in one driver: what a restart is to
the service (the query's id and batch ids, read from the checkpoint) is the same in one
driver, and a second driver's start (a JVM, for Connect a server) was 9 s of CPU a case.

The cases, one per cell of the compatibility table in docs/versions.md:
  - classic PySpark 3.5.7, 4.0.0 and 4.1.1 on a brand-new Kafka 3.9.1 broker (the
    project's own 4.2.0 runs on the suite's Kafka 4.4.0 in every other Spark test, and
    here once on 3.9.1: a job with the listener, what the broker's version can change);
  - Spark Connect clients 3.5.7, 4.0.0, 4.1.1 and 4.2.0 (``pyspark[connect]``) with a
    local Connect server that the client starts, on the suite's Kafka 4.4.0. A 4.x client
    runs the listener itself, fed over gRPC; a 3.5 client pickles it and the server runs
    it in a Python worker of its own (``PYSPARK_PYTHON``, the wheel pip-installed on its
    PYTHONPATH), and 3.5's server jar comes from Maven Central (4.x wheels ship it).
Each Spark's Kafka connector so reads both brokers: a Connect server is a classic driver
reading Kafka with its version's connector, so a version's classic cell need not run on
4.4.0 as well (docs/decisions.md, "Spark versions: each connector on both brokers")."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import kafka_broker
from harness.machine import free_port, machine_lock, stop_process
from harness.service_process import ServiceProcess
from harness.spark_drivers import (
    CONNECT_VERSIONS,
    PROJECT_VERSION,
    VERSIONS,
    connector_jars,
    driver_python,
)
from tests.support.driver_job import JOB
from tests.support.kafka import (
    committed_offsets,
    create_topics,
    log_ends,
    produce,
    run_sync,
    unique_group,
)
from tests.support.service import wait_for
from tests.support.wheels import listener_wheel

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

OLD_KAFKA = "3.9.1"
# A Connect client's local server listens on 15002 whichever test starts it: the Connect
# cases run one after another on one worker (and under a lock against other test runs).
# Together about ten minutes on one worker: handed out first (``long``).
LOCAL_CONNECT = [pytest.mark.xdist_group("spark-connect-15002"), pytest.mark.long]
# The jobs on Kafka 3.9.1 share the module's broker of that version (started once): on one
# worker.
ON_OLD_KAFKA = pytest.mark.xdist_group("spark-on-kafka-3.9")
CONNECT_CASES = [  # on the suite's broker (Kafka 4.4.0)
    pytest.param(v, id=f"{v}-connect", marks=LOCAL_CONNECT) for v in CONNECT_VERSIONS
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return listener_wheel(tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="module")
def old_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Kafka 3.9.1 broker of its own, started in an empty folder."""
    broker = kafka_broker.brand_new(tmp_path_factory.mktemp("kafka-391"), OLD_KAFKA)
    yield broker.bootstrap
    broker.stop()


@pytest.mark.parametrize("version", CONNECT_CASES)
def test_a_job_under_spark_connect_is_committed(
    version: str, wheel: Path, tmp_path: Path, kafka_bootstrap: str
) -> None:
    job_is_committed(version, "connect", wheel, tmp_path, kafka_bootstrap)


@ON_OLD_KAFKA
@pytest.mark.parametrize("version", VERSIONS)
def test_a_classic_job_is_committed_on_kafka_3_9(
    version: str, wheel: Path, tmp_path: Path, old_kafka: str
) -> None:
    job_is_committed(version, "classic", wheel, tmp_path, old_kafka)


@ON_OLD_KAFKA
def test_the_projects_spark_is_committed_on_kafka_3_9(
    wheel: Path, tmp_path: Path, old_kafka: str
) -> None:
    # What the broker's version can change: the connector reading it, our commits and
    # reads of it. One run shows it; the service down, the restart and the followed folder
    # are the same on every broker and run on 4.4.0 (test_spark_e2e.py and
    # test_checkpoint_follower.py).
    job_is_committed(PROJECT_VERSION, "classic", wheel, tmp_path, old_kafka, once=True)


def job_is_committed(
    version: str,
    mode: str,
    wheel: Path,
    tmp_path: Path,
    bootstrap: str,
    *,
    once: bool = False,
) -> None:
    python = driver_python(version, "connect" if mode == "connect" else None)
    # pip installs the wheel into a folder of this test's own, on the job's PYTHONPATH (a
    # Connect 3.5 server's Python workers inherit it): the cached driver environment,
    # shared by every checkout, stays pyspark alone
    site = tmp_path / "site-packages"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
         str(wheel)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    jars = ",".join(connector_jars(python, connect=mode == "connect"))
    topic = f"spark-{version}-{free_port()}"
    run_sync(create_topics(bootstrap, [topic], 2))
    run_sync(produce(bootstrap, topic, 300))
    ends = log_ends(bootstrap, [topic])
    checkpoint = tmp_path / "checkpoint"
    services: dict[str, ServiceProcess] = {}  # by the group it commits
    for attach in ("listener",) if once else ("listener", "follower"):
        folder = tmp_path / attach
        folder.mkdir()
        services[unique_group(f"v{version}-{attach}")] = ServiceProcess(
            folder, bootstrap, follow_interval_seconds=0.3
        )
    (listened, listener), *followers = services.items()
    (tmp_path / "job.py").write_text(JOB)

    def committed_to_the_end(run: dict[str, Any], what: str) -> None:
        for group, service in services.items():
            wait_for(lambda: committed_offsets(bootstrap, group) == ends, 30, what)  # noqa: B023
            view = service.http.get(f"/v1/queries/{run['id']}").json()
            assert view["group_id"] == group
            assert view["last_completed_checkpoint"] == run["batch"], group

    port_15002 = machine_lock("spark-connect-15002")
    try:
        for group, follower in followers:
            follower.start()
            followed = follower.http.post(
                "/v1/followed-folders", json={"path": str(checkpoint), "group_id": group}
            )
            assert followed.status_code == 201, followed.text
        if once:
            listener.start()
        with (
            port_15002 if mode == "connect" else contextlib.nullcontext(),
            Driver(
                [str(python), str(tmp_path / "job.py"), listener.url, listened, bootstrap,
                 topic, str(checkpoint), jars, mode, "1" if once else "2"],
                # the Python a Connect 3.5 server runs the unpickled listener in
                {**os.environ, "PYSPARK_PYTHON": str(python), "PYTHONPATH": str(site)},
                tmp_path / "job.log",
            ) as job,
        ):  # fmt: skip
            first = job.run(version)
            if once:
                committed_to_the_end(first, "the commit")
                return
            # The listener's service down (its port refuses connections): Spark is not
            # slowed or broken.
            assert first["batch"] >= 4, "every batch of the 300 records, 60 a batch"
            assert committed_offsets(bootstrap, listened) == {}
            # The service up, the query started again on the same checkpoint: the same
            # query, its batch ids going on, committed to the end both ways.
            listener.start()
            run_sync(produce(bootstrap, topic, 120, start=300))
            ends = log_ends(bootstrap, [topic])
            restarted = job.run(version)
            assert restarted["id"] == first["id"]
            assert restarted["batch"] > first["batch"], "several batches"
            committed_to_the_end(restarted, "the restart")
    finally:
        for service in services.values():
            service.stop()


class Driver:
    """The job's driver process (``JOB``), each of its runs read off its standard output
    (its log in ``log``); each run after the first starts when :meth:`run` asks for it."""

    SECONDS = 300.0  # a run, from a driver's start on a loaded machine

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                text=True,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.runs = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, version: str) -> dict[str, Any]:
        """The next run's ``{"id", "batch", "spark"}``, once it ended."""
        assert self.process.stdin is not None
        if self.runs:
            self.process.stdin.write("\n")
            self.process.stdin.flush()
        self.runs += 1
        deadline = time.monotonic() + self.SECONDS
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"run {self.runs} did not end: {self._tail()}") from None
            if line is None:
                raise AssertionError(f"the driver exited before run {self.runs}: {self._tail()}")
            if line.startswith("{"):
                ran: dict[str, Any] = json.loads(line)
                assert ran["spark"] == version
                return ran

    def _tail(self) -> str:
        return self.log.read_text()[-3000:]

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        """After its runs, the driver stops Spark and exits 0; after a failure, stopped."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        if exc[0] is not None:
            stop_process(self.process)
            return
        try:
            assert self.process.wait(timeout=self.SECONDS) == 0, self._tail()
        finally:
            stop_process(self.process)
