"""Both ways of attaching a job, on every Spark that users run. A real job, in a driver
that is a clean environment with only pyspark and, for the listener, the listener's wheel
(Spark's Kafka connector of that version from Maven Central), reads a real topic, and the
service commits the group exactly to the topic's end once the job restarts on the same
checkpoint. Each run is seen both ways at once, by two services, each with a
group of its own: one the job's listener reports to, one that follows the job's
checkpoint folder (for it, the job has no listener at all). The job first runs with the
listener's service down (its address refuses connections): Spark finishes every batch
all the same; the next run, on the same checkpoint with the service up, goes on with the
query's batch ids and is committed to the end. Two Spark runs a case: a third (a restart
seen by a service that saw the first) showed nothing a version changes, and the service's
side of a restart runs in tests/e2e/test_spark_e2e.py.

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
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import kafka_broker
from harness.machine import free_port, machine_lock
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


@pytest.mark.parametrize("version", VERSIONS)
def test_a_classic_job_is_committed_on_kafka_3_9(
    version: str, wheel: Path, tmp_path: Path, old_kafka: str
) -> None:
    job_is_committed(version, "classic", wheel, tmp_path, old_kafka)


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
    try:
        for attach in ("listener",) if once else ("listener", "follower"):
            folder = tmp_path / attach
            folder.mkdir()
            group = unique_group(f"v{version}-{attach}")
            services[group] = ServiceProcess(folder, bootstrap, follow_interval_seconds=0.3)
            services[group].start()
            if attach == "follower":
                followed = services[group].http.post(
                    "/v1/followed-folders", json={"path": str(checkpoint), "group_id": group}
                )
                assert followed.status_code == 201, followed.text
        listened, listener = next(iter(services.items()))
        (tmp_path / "job.py").write_text(JOB)

        def run_job(to: str = listener.url) -> dict[str, Any]:
            port_15002 = machine_lock("spark-connect-15002")
            with port_15002 if mode == "connect" else contextlib.nullcontext():
                job = subprocess.run(
                    [str(python), str(tmp_path / "job.py"), to, listened, bootstrap, topic,
                     str(checkpoint), jars, mode],
                    capture_output=True, text=True, timeout=300,
                    # the Python a Connect 3.5 server runs the unpickled listener in
                    env={**os.environ, "PYSPARK_PYTHON": str(python), "PYTHONPATH": str(site)},
                )  # fmt: skip
            assert job.returncode == 0, job.stderr[-3000:]
            ran: dict[str, Any] = json.loads(job.stdout.strip().splitlines()[-1])
            assert ran["spark"] == version
            return ran

        def committed_to_the_end(run: dict[str, Any], what: str) -> None:
            for group, service in services.items():
                wait_for(lambda: committed_offsets(bootstrap, group) == ends, 30, what)  # noqa: B023
                view = service.http.get(f"/v1/queries/{run['id']}").json()
                assert view["group_id"] == group
                assert view["last_completed_checkpoint"] == run["batch"], group

        if once:
            committed_to_the_end(run_job(), "the commit")
            return
        # The listener's service down: not slowed or broken.
        down = run_job(f"http://127.0.0.1:{free_port()}")
        assert down["batch"] >= 4, "every batch of the 300 records, 60 a batch"
        assert committed_offsets(bootstrap, listened) == {}
        # Restarted on the same checkpoint, the service up: the same query, its batch ids
        # going on, committed to the end both ways.
        run_sync(produce(bootstrap, topic, 120, start=300))
        ends = log_ends(bootstrap, [topic])
        restarted = run_job()
        assert restarted["id"] == down["id"]
        assert restarted["batch"] > down["batch"], "several batches"
        committed_to_the_end(restarted, "the restart")
    finally:
        for service in services.values():
            service.stop()
