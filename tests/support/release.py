"""The release folders the tests install from, as a user would:

- ``make_release_folder``: what ``make dist`` makes of this tree (``scripts/dist.py``), once
  per test run, shared by every pytest-xdist worker of it;
- ``newest_release_folder``: the newest release, the version the manual's procedures name:
  this tree's folder when the tree is that release, else ``make dist RELEASE=1`` run in a
  fresh clone of the commit releases.toml records, once per machine, and held to the
  checksums recorded when it was cut."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.machine import ROOT, file_lock, refuse_in_inner_loop
from harness.spark_drivers import CACHE

versions = importlib.import_module("release")  # scripts/release.py: harness puts it on the path


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


def newest_release_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The newest release's folder (the module's docstring says where it comes from); a
    rebuild that differs from the recorded checksums fails, naming each file."""
    newest = versions.released_versions()["version"]
    entry = next(e for e in versions.releases() if e["version"] == newest)
    if entry == versions.releases()[0]:  # the tree is the release, not yet recorded
        return make_release_folder(tmp_path_factory)
    refuse_in_inner_loop("rebuilds the newest release from its commit (make dist RELEASE=1)")
    home = CACHE / "releases" / f"{newest}-{entry['commit'][:7]}-dist"
    home.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(home.parent / f"{home.name}.lock"):
        if not (home / ".complete").exists():
            shutil.rmtree(home, ignore_errors=True)
            clone = home / "clone"
            for command in (
                ["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)],
                ["git", "-C", str(clone), "checkout", "-q", entry["commit"]],
                ["make", "-C", str(clone), "dist", "RELEASE=1"],
            ):
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    pytest.fail(f"{' '.join(command)}:\n{(done.stdout + done.stderr)[-4000:]}")
            (home / ".complete").write_text(entry["commit"] + "\n")
    folder = home / "clone" / "dist" / newest
    differences = versions.verify(ROOT, folder)
    assert not differences, f"{folder} is not the release recorded: {differences}"
    return folder


def build_info(folder: Path) -> dict[str, Any]:
    """What the folder says it holds (``build.json``)."""
    info: dict[str, Any] = json.loads((folder / "build.json").read_text())
    return info


def one(folder: Path, pattern: str) -> Path:
    """The one file of ``folder`` matching ``pattern``."""
    (found,) = folder.glob(pattern)
    return found
