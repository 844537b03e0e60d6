"""The Kafka-to-Parquet job as operators run it: ``spark-submit`` with the connector in
``--jars`` and ``jobs/`` shipped in ``--py-files`` (the listener needs nothing else)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.machine import ROOT
from harness.service_process import ServiceProcess
from tests.support.kafka import committed_offsets, produce, run_sync, unique_group
from tests.support.service import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_spark_submit_with_py_files_commits_the_jobs_offsets(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    from jobs.spark_session import kafka_connector_jars

    topic, group = new_topic(2), unique_group("submit")
    run_sync(produce(kafka_bootstrap, topic, 50))
    py_files = tmp_path / "jobs.zip"
    with zipfile.ZipFile(py_files, "w") as archive:
        for source in (ROOT / "jobs").glob("*.py"):
            archive.write(source, f"jobs/{source.name}")
    service = ServiceProcess(tmp_path, kafka_bootstrap).start()
    try:
        submitted = subprocess.run(
            [
                str(Path(sys.executable).parent / "spark-submit"),
                "--master",
                "local[2]",
                "--jars",
                ",".join(kafka_connector_jars()),
                "--py-files",
                str(py_files),
                str(ROOT / "jobs" / "kafka_to_parquet.py"),
                "--bootstrap-servers",
                kafka_bootstrap,
                "--topics",
                topic,
                "--output",
                str(tmp_path / "out"),
                "--checkpoint",
                str(tmp_path / "checkpoint"),
                "--sidecar-url",
                service.url,
                "--group",
                group,
                "--available-now",  # ends once it processed the 50 records: no guess
            ],
            cwd=tmp_path,  # away from the checkout: only --py-files brings jobs/
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert submitted.returncode == 0, submitted.stderr[-3000:]
        # The job ended after its last batch and the listener delivered it before Spark
        # stopped; the service commits it asynchronously (the bound is not a speed guess).
        wait_for(
            lambda: sum(committed_offsets(kafka_bootstrap, group).values()) == 50,
            timeout=120,
            what="the job's 50 records committed",
        )
    finally:
        service.stop()
