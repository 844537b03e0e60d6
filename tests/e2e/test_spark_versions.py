"""Both ways of attaching a job, on every Spark that users run: a real job in a driver of
PySpark 3.5.7, 4.0.0 and 4.1.1 (each a clean environment with only pyspark and, for the
listener, the listener's wheel; Spark's Kafka connector of that version from Maven
Central), and a Spark Connect 4.0.0 client (``pyspark[connect]``, a local Connect
server; its listener runs in the client, fed over gRPC), reads a real topic, and the
service commits the group exactly to the topic's end, then again after the job restarts
on the same checkpoint: once reported by the listener, once followed through the
checkpoint folder with no listener at all. With the listener, the job first runs with
the service down (its address refuses connections): Spark finishes every batch all the
same, and the next run, with the service up, is committed to the end. The project's own
PySpark (4.2.0, classic) runs in every other Spark test."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.machine import free_port
from harness.service_process import ServiceProcess
from harness.spark_drivers import VERSIONS, connector_jars, driver_python
from tests.support.driver_job import JOB
from tests.support.kafka import committed_offsets, log_ends, produce, run_sync, unique_group
from tests.support.service import wait_for
from tests.support.wheels import listener_wheel

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return listener_wheel(tmp_path_factory.mktemp("wheels"))


@pytest.mark.parametrize("attach", ["listener", "follower"])
@pytest.mark.parametrize(
    ("version", "mode"),
    [*((v, "classic") for v in VERSIONS), ("4.0.0", "connect")],
    ids=[*VERSIONS, "4.0.0-connect"],
)
def test_a_job_on_this_spark_is_committed(
    version: str,
    mode: str,
    attach: str,
    wheel: Path,
    tmp_path: Path,
    kafka_bootstrap: str,
    new_topic: Any,
) -> None:
    python = driver_python(version, connect=mode == "connect")
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--force-reinstall", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    jars = ",".join(connector_jars(python))
    topic, group = new_topic(2), unique_group(f"v{version}")
    run_sync(produce(kafka_bootstrap, topic, 300))
    ends = log_ends(kafka_bootstrap, [topic])
    checkpoint = tmp_path / "checkpoint"
    service = ServiceProcess(tmp_path, kafka_bootstrap, follow_interval_seconds=0.3).start()
    try:
        url = service.url if attach == "listener" else "-"
        if attach == "follower":
            followed = service.http.post(
                "/v1/followed-folders", json={"path": str(checkpoint), "group_id": group}
            )
            assert followed.status_code == 201, followed.text
        (tmp_path / "job.py").write_text(JOB)

        def run_job(to: str = url) -> dict[str, Any]:
            job = subprocess.run(
                [str(python), str(tmp_path / "job.py"), to, group, kafka_bootstrap, topic,
                 str(checkpoint), jars, mode],
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert job.returncode == 0, job.stderr[-3000:]
            ran: dict[str, Any] = json.loads(job.stdout.strip().splitlines()[-1])
            assert ran["spark"] == version
            return ran

        if attach == "listener":  # the service down: the job is not slowed or broken
            down = run_job(f"http://127.0.0.1:{free_port()}")
            assert down["batch"] >= 4, "every batch of the 300 records, 60 a batch"
            assert committed_offsets(kafka_bootstrap, group) == {}
            run_sync(produce(kafka_bootstrap, topic, 120, start=300))
            ends = log_ends(kafka_bootstrap, [topic])
        first = run_job()
        assert first["batch"] >= 2, "several batches"
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, 30, "the commit")
        view = service.http.get(f"/v1/queries/{first['id']}").json()
        assert view["group_id"] == group
        assert view["last_completed_checkpoint"] == first["batch"]

        # Restarted on the same checkpoint: the same query, its batch ids going on.
        run_sync(produce(kafka_bootstrap, topic, 130, start=500))
        ends = log_ends(kafka_bootstrap, [topic])
        second = run_job()
        assert second["id"] == first["id"]
        assert second["batch"] > first["batch"]
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, 30, "the restart")
        view = service.http.get(f"/v1/queries/{second['id']}").json()
        assert view["last_completed_checkpoint"] == second["batch"]
    finally:
        service.stop()
