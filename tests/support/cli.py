"""The product's command line, run as a user runs it (``python -m spark_offset_sidecar.cli``)
against a broker, and ``describe-group``'s table read back as rows."""

from __future__ import annotations

import os
import subprocess
import sys


def offset_sidecar(
    bootstrap: str, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``offset-sidecar ARGS`` with SIDECAR_KAFKA_BOOTSTRAP_SERVERS=``bootstrap``."""
    return subprocess.run(
        [sys.executable, "-m", "spark_offset_sidecar.cli", *args],
        env={**os.environ, "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": bootstrap},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def describe_group(bootstrap: str, group: str, *topics: str) -> list[list[str]]:
    """The rows of ``describe-group`` (GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET
    LAG, ``-`` for none), as kafka-consumer-groups.sh prints them; fails on an error."""
    named = [arg for topic in topics for arg in ("--topic", topic)]
    done = offset_sidecar(bootstrap, "describe-group", group, *named)
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines() if line.startswith(f"{group} ")]
