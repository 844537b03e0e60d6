"""``make demo`` from a cold start: ``python -m jobs.demo`` with a broker it starts itself in
an empty folder on a private port, so a warm broker (one that already has
``__consumer_offsets``) can never hide a first-contact defect again. The demo exits 0
only when the group's lag, read back from Kafka, reached zero."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.kafka_broker import answers
from harness.machine import ROOT, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_the_demo_reaches_zero_lag_on_a_brand_new_broker(tmp_path: Path) -> None:
    kafka_dir, state = tmp_path / "kafka", tmp_path / "demo"
    kafka_dir.mkdir()
    kafka_port = free_port()
    assert not answers(f"127.0.0.1:{kafka_port}")
    env = {
        **os.environ,
        "LOCAL_KAFKA_PORT": str(kafka_port),
        "LOCAL_KAFKA_DIR": str(kafka_dir),  # empty: the broker formats new storage
        "SIDECAR_PORT": str(free_port()),
        "DEMO_STATE_DIR": str(state),
        "DEMO_RECORDS": "1500",
        "DEMO_RATE": "500",
        "DEMO_TIMEOUT": "300",
    }
    try:
        demo = subprocess.run(
            [sys.executable, "-m", "jobs.demo"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:  # the demo stops the broker it started; make sure of it even on a failure
        subprocess.run(
            [str(ROOT / "scripts" / "local-kafka.sh"), "stop"], env=env, capture_output=True
        )
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output[-4000:]
    assert "lag is zero" in output, output[-4000:]
    # Its first read of the group is the brand-new broker's first coordinator look-up: it
    # must wait for __consumer_offsets to be created, never fail.
    assert "could not read the group" not in output, output[-4000:]
    assert "before the job" in output
    assert "sidecar status of demo-kafka-to-parquet: OK, total lag 0" in output, output[-4000:]
    assert (kafka_dir / "data" / "meta.properties").exists(), "the broker formatted the folder"
    assert "Kafka stopped" in output, "the demo stops the broker it started"
