"""Wheels built as a release would build them: from a clean copy of what the distribution
holds, never in the checkout (an in-tree ``build/`` keeps files that no longer exist, and
leaves a folder behind)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.machine import ROOT, machine_lock
from harness.spark_drivers import CACHE


def listener_wheel(folder: Path) -> Path:
    """Build ``spark-offset-listener`` (``jobs/pyproject.toml``) into ``folder``."""
    source = folder / "source"
    source.mkdir(parents=True)
    shutil.copy(ROOT / "jobs" / "pyproject.toml", source)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(
        ROOT / "jobs" / "spark_offset_listener", source / "spark_offset_listener", ignore=skip
    )
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder)]
    subprocess.run([*build, str(source)], check=True, capture_output=True)
    (wheel,) = folder.glob("spark_offset_listener-*.whl")
    return wheel


def dockerfile_build_context() -> list[str]:
    """What the Dockerfile's build stage copies from the checkout (``COPY src... dst``)."""
    sources: list[str] = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources += line.split()[1:-1]
    return sources


def dockerfile_healthcheck() -> list[str]:
    """The Dockerfile's HEALTHCHECK command (exec form)."""
    text = (ROOT / "Dockerfile").read_text()
    found = re.search(r"^HEALTHCHECK .*?\\\n\s+CMD (\[.*\])$", text, re.MULTILINE)
    assert found, "the Dockerfile has no HEALTHCHECK CMD in exec form"
    command: list[str] = json.loads(found.group(1))
    return command


def service_wheel(folder: Path) -> Path:
    """Build ``spark-offset-sidecar`` into ``folder`` as the Dockerfile builds it: from only
    what it copies."""
    context = folder / "context"
    context.mkdir(parents=True)
    for source in dockerfile_build_context():
        if (ROOT / source).is_dir():
            skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(ROOT / source, context / source, ignore=skip)
        else:
            shutil.copy(ROOT / source, context / source)
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder)]
    subprocess.run([*build, str(context)], check=True, capture_output=True)
    (wheel,) = folder.glob("spark_offset_sidecar-*.whl")
    return wheel


# Requirements that PyPI has only as source, by name: uv builds such a one again at every
# install, each build kept in a new revision of its cache (uv 0.13.9, pyspark 4.2.0: 19 s
# and about 1 GB of cache an install; the cache had grown to 33 GB).
SOURCE_ONLY = ("pyspark",)
WHEELHOUSE = CACHE / "wheels"


def wheelhouse(requirements: list[str]) -> Path:
    """A folder with a wheel of each of ``requirements`` named in ``SOURCE_ONLY``, each
    built once per machine (``pip wheel``), for installers' ``--find-links``."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with machine_lock("wheelhouse"):
        for requirement in requirements:
            name, _, version = requirement.partition("==")
            if name not in SOURCE_ONLY or any(WHEELHOUSE.glob(f"{name}-{version}-*.whl")):
                continue
            with tempfile.TemporaryDirectory(dir=WHEELHOUSE) as built:  # whole wheels only
                build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", built]
                subprocess.run([*build, requirement], check=True)
                for wheel in Path(built).glob("*.whl"):
                    wheel.replace(WHEELHOUSE / wheel.name)
    return WHEELHOUSE
