"""The release folder that ``make dist`` makes (``scripts/dist.py``), made once per test
run and shared by every pytest-xdist worker of it: the tests that install the wheels, run
the image or read the jar take them from there, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.machine import ROOT, file_lock, refuse_in_inner_loop


def make_release_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``scripts/dist.py --out ...`` run by the first worker that asks, under a lock the
    others wait on; a failed build fails each asker with its output, once built."""
    refuse_in_inner_loop("runs make dist (podman, helm, Maven, syft)")
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    shared = base.parent / f"dist-{run}" if run else base / "dist"
    shared.mkdir(exist_ok=True)
    out, failed = shared / "release", shared / "failed"
    with file_lock(shared / "lock"):
        if not (out / "SHA256SUMS").exists() and not failed.exists():
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, str(ROOT / "scripts" / "dist.py"), "--out", str(out)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                failed.write_text(done.stdout + done.stderr)
            (shared / "seconds").write_text(f"{time.monotonic() - started:.0f}")
    if failed.exists():
        pytest.fail(f"make dist failed:\n{failed.read_text()[-4000:]}")
    return out


def build_info(folder: Path) -> dict[str, Any]:
    """What the folder says it holds (``build.json``)."""
    info: dict[str, Any] = json.loads((folder / "build.json").read_text())
    return info


def one(folder: Path, pattern: str) -> Path:
    """The one file of ``folder`` matching ``pattern``."""
    (found,) = folder.glob(pattern)
    return found
