"""The listener as a Spark cluster gets it: the release's ``spark-offset-listener``,
published to a package index (the ``package_index`` fixture: twine upload), pip-installed
by version into a clean virtual environment that has nothing but pyspark, as the Python
listener's page installs it; a real job run by that environment's Python reads a real
topic, and the service commits its offsets to the group, exact in Kafka."""

from __future__ import annotations

import subprocess
import venv
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from harness.registries import PackageIndex
from harness.service_process import ServiceProcess
from jobs.spark_session import kafka_connector_jars
from tests.support.driver_job import JOB
from tests.support.kafka import committed_offsets, produce, run_sync, unique_group
from tests.support.registries import reader_env
from tests.support.release import build_info
from tests.support.service import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_the_listener_from_the_index_in_an_environment_with_only_pyspark_commits_a_real_job(
    tmp_path: Path,
    kafka_bootstrap: str,
    new_topic: Any,
    published_release: Path,
    package_index: PackageIndex,
) -> None:
    release = build_info(published_release)["version"]
    env = tmp_path / "driver"
    venv.create(env, with_pip=True)
    python = str(env / "bin" / "python")
    pyspark = f"pyspark=={version('pyspark')}"  # the version the connector jars match
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", pyspark, f"spark-offset-listener=={release}"],
        capture_output=True,
        text=True,
        env=reader_env(tmp_path, index=package_index),
    )
    assert installed.returncode == 0, installed.stderr
    said = subprocess.run(
        [python, "-c", "import spark_offset_listener as l; print(l.__version__)"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert said.stdout == f"{release}\n", said
    for absent in ("fastapi", "aiokafka", "spark_offset_sidecar"):
        probe = subprocess.run([python, "-c", f"import {absent}"], capture_output=True)
        assert probe.returncode != 0, f"{absent} is in the driver's environment"

    topic, group = new_topic(2), unique_group("wheel")
    run_sync(produce(kafka_bootstrap, topic, 150))
    service = ServiceProcess(tmp_path, kafka_bootstrap).start()
    try:
        (tmp_path / "job.py").write_text(JOB)
        jars = ",".join(kafka_connector_jars())
        arguments = [
            service.url, group, kafka_bootstrap, topic, str(tmp_path / "checkpoint"), jars,
            "classic",
        ]  # fmt: skip
        job = subprocess.run(
            [python, str(tmp_path / "job.py"), *arguments],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert job.returncode == 0, job.stderr[-3000:]

        def all_committed() -> bool:
            committed = committed_offsets(kafka_bootstrap, group)
            return set(committed) == {(topic, 0), (topic, 1)} and sum(committed.values()) == 150

        wait_for(all_committed, timeout=30, what="the job's 150 records committed")
    finally:
        service.stop()
