"""Wheels built as a release would build them: from a clean copy of what the distribution
holds, never in the checkout (an in-tree ``build/`` keeps files that no longer exist, and
leaves a folder behind)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness.machine import ROOT  # and scripts/ on the path

# isort: split
from wheelhouse import requirements as requirements  # scripts/wheelhouse.py
from wheelhouse import wheelhouse as wheelhouse


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
