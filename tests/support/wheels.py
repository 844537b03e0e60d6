"""Wheels built as a release would build them: from a clean copy of what the distribution
holds, never in the checkout (an in-tree ``build/`` keeps files that no longer exist, and
leaves a folder behind)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from harness.machine import ROOT


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
