"""The wheelhouse: a wheel of each requirement that PyPI has only as source, built once per
machine, for uv's ``--find-links``. uv builds such a requirement again at every install,
each build kept in a new revision of its cache (uv 0.13.9, pyspark 4.2.0: 19 s and about
1 GB of cache an install; the cache had grown to 33 GB); pip builds it once here.

    python scripts/wheelhouse.py    # builds what pyproject.toml needs, prints the folder

Run by the Python whose pip builds the wheels (the Makefile: the new virtualenv's). The
folder is ``SPARK_OFFSET_SIDECAR_CACHE``/wheels, shared by every checkout. Standard library
only: it runs before anything is installed.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Requirements that PyPI has only as source, by name.
SOURCE_ONLY = ("pyspark",)
CACHE = Path(
    os.environ.get("SPARK_OFFSET_SIDECAR_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spark-offset-sidecar"
)
WHEELHOUSE = CACHE / "wheels"


def requirements() -> list[str]:
    """Every requirement ``pyproject.toml`` names: its dependencies and each extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    return [*project["dependencies"], *(r for extra in extras for r in extra)]


def wheelhouse(wanted: list[str]) -> Path:
    """The folder, holding a wheel of each of ``wanted`` named in ``SOURCE_ONLY`` (pinned
    ``name==version``), each built once per machine by ``pip wheel``."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with (WHEELHOUSE / ".lock").open("w") as held:  # the cache's user's own
        fcntl.flock(held, fcntl.LOCK_EX)  # one builder per machine; released on close
        for requirement in wanted:
            name, _, version = requirement.partition("==")
            if name not in SOURCE_ONLY or any(WHEELHOUSE.glob(f"{name}-{version}-*.whl")):
                continue
            with tempfile.TemporaryDirectory(dir=WHEELHOUSE) as built:  # whole wheels only
                build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", built]
                subprocess.run([*build, requirement], check=True)
                for wheel in Path(built).glob("*.whl"):
                    wheel.replace(WHEELHOUSE / wheel.name)
    return WHEELHOUSE


if __name__ == "__main__":
    print(wheelhouse(requirements()))
