"""Spark drivers of other PySpark versions than the project's own: a virtual environment
with nothing but ``pyspark==<version>`` (the listener wheel is installed by the caller),
and Spark's Kafka connector jars for that version from Maven Central
(``scripts/fetch-jars.sh``; Scala 2.12 for Spark 3.5, 2.13 for Spark 4).

Made once per machine, in a cache shared by every checkout (``SPARK_OFFSET_SIDECAR_CACHE``,
default ``~/.cache/spark-offset-sidecar``): ``drivers/pyspark-<version>[-connect]-<key>``,
370 MB (3.5.7 alone) to 890 MB (4.2.0 with ``connect``'s packages) each, about 5 GB in
all, where the key is a hash of what the environment is made of (the
requirements and the Python that made it). A second clone rebuilds nothing it already has;
a change to the pins makes a new folder. Made under a lock, so two checkouts making the
same one at once make it once.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

from harness.machine import ROOT, file_lock

CACHE = Path(
    os.environ.get("SPARK_OFFSET_SIDECAR_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spark-offset-sidecar"
)
DRIVERS = CACHE / "drivers"
# The versions the tests run (looked up 2026-11-23: PyPI has these pyspark releases, and
# Maven Central has spark-sql-kafka-0-10 and spark-token-provider-kafka-0-10 for each:
# _2.12 for 3.5.7, _2.13 for 4.0.0 and 4.1.1). The project's own, 4.2.0, is .venv's for
# the classic tests on the suite's broker; its Connect and Kafka 3.9 cases get drivers too.
VERSIONS = ("3.5.7", "4.0.0", "4.1.1")
PROJECT_VERSION = "4.2.0"  # the project's own pyspark (pyproject.toml's spark extra)
# Every version a Spark Connect client is tested on, the project's own included.
CONNECT_VERSIONS = (*VERSIONS, PROJECT_VERSION)
# pyspark[connect] 3.5 requires numpy<2 but leaves pandas and pyarrow open, and pip then
# picks releases that refuse NumPy 1 at import ("pyarrow requires NumPy 2.0 or newer",
# pyarrow 26; seen 2026-11-23): the newest that still take NumPy 1.26.
_CONNECT_PINS = {"3.5": ("pandas<2.3", "pyarrow<18")}


def driver_python(version: str, extra: str | None = None) -> Path:
    """The Python of a virtual environment that has pyspark ``version`` and nothing else,
    or ``pyspark[extra]``: ``connect`` (the Spark Connect client's dependencies) or
    ``pipelines`` (``spark-pipelines``, Spark Declarative Pipelines, 4.1 and later)."""
    requirements = [
        f"pyspark{f'[{extra}]' if extra else ''}=={version}",
        *(_CONNECT_PINS.get(version[:3], ()) if extra == "connect" else ()),
    ]
    return cached_venv(DRIVERS, f"pyspark-{version}{f'-{extra}' if extra else ''}", requirements)


def cached_venv(parent: Path, name: str, requirements: list[str]) -> Path:
    """The Python of a virtual environment in ``parent/<name>-<key>`` with ``requirements``
    installed, made once (see the module's docstring for the key and the lock)."""
    made_of = "\n".join([*requirements, sys.version, os.path.realpath(sys.base_prefix)])
    key = hashlib.sha256(made_of.encode()).hexdigest()[:12]
    folder = parent / f"{name}-{key}"
    python = folder / "bin" / "python"
    parent.mkdir(parents=True, exist_ok=True)
    with file_lock(folder.with_name(f"{folder.name}.lock")):
        if not (folder / ".complete").exists():
            venv.create(folder, with_pip=True, clear=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", *requirements],
                check=True,
                capture_output=True,
            )
            (folder / ".complete").write_text(made_of + "\n")
    return python


def connector_jars(python: Path, *, connect: bool = False) -> list[str]:
    """The Kafka connector jars for the pyspark that ``python`` has (fetched once); with
    ``connect``, also the Spark Connect server's jar where pyspark's wheel lacks it (3.5:
    a 3.5 client's local server needs it in ``spark.jars``)."""
    jars = _fetched("spark", python)
    return sorted(jars + _fetched("spark-connect", python)) if connect else jars


def _fetched(what: str, python: Path) -> list[str]:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "fetch-jars.sh"), what, str(python)],
        check=True,
        capture_output=True,
        text=True,
    )
    folder = Path(done.stdout.strip().splitlines()[-1])
    return sorted(str(jar) for jar in folder.glob("*.jar"))


def jvm_listener_jar() -> Path:
    """This checkout's JVM listener (``scripts/build-jvm-listener.sh``: built once per
    machine for these sources)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-jvm-listener.sh")],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":  # make them ahead of the tests: python -m harness.spark_drivers
    for each in sys.argv[1:] or VERSIONS:
        print(each, driver_python(each), len(connector_jars(driver_python(each))), "jars")
