"""aiokafka releases other than the project's own, for the contract test of the one door
below aiokafka's public API (``adapters/kafka/wire.py``): a virtual environment with
nothing but ``aiokafka==<version>``, made once per machine in the cache shared by every
checkout (``SPARK_OFFSET_SIDECAR_CACHE``): ``aiokafka/aiokafka-<version>-<key>``, the key
a hash of the requirement and the Python that made it, under a lock (as the Spark
drivers' environments, ``harness.spark_drivers``).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

from harness.spark_drivers import CACHE, cached_venv

ENVIRONMENTS = CACHE / "aiokafka"


@functools.cache
def newest() -> str:
    """The newest aiokafka release on PyPI (``pip index versions``, asked once per
    process; ``TEST_AIOKAFKA`` names another, e.g. offline)."""
    named = os.environ.get("TEST_AIOKAFKA")
    if named:
        return named
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "aiokafka"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"^aiokafka \(([^)]+)\)", done.stdout, re.MULTILINE)
    assert found, f"pip index versions said: {done.stdout[-500:]}{done.stderr[-500:]}"
    return found.group(1)


def aiokafka_python(version: str) -> Path:
    """The Python of a virtual environment that has aiokafka ``version`` and nothing else
    (the door imports aiokafka and the standard library only)."""
    return cached_venv(ENVIRONMENTS, f"aiokafka-{version}", [f"aiokafka=={version}"])
