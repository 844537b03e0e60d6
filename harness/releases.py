"""A release of the product as its users had it, rebuilt from the repository, for the tests
that run it beside this tree (wire compatibility, rolling upgrades, downgrades):

    release = previous_release()    # releases.toml: the newest recorded release before this tree
    built = built_release(release)  # its artifacts, and the service in a virtualenv of its own
    ServiceProcess(workdir, bootstrap, python=built.python)   # that release's serve

``releases.toml`` records each release with its commit (a tag alone does not travel with
every clone). The release's files come from git at that commit (``git archive``: nothing
of this checkout), and are built as that tree built them: the service's wheel and the
Python listener's wheel by ``uv build``, the JVM listener's jar by its POM (Maven). The
service's wheel is installed, with the ``postgres`` extra, into a virtualenv of its own,
its dependencies resolved within the ranges that release declared, as a user installing
it would have them.

A release never changes: everything is made once per machine, in the cache shared by
every checkout (``releases/<version>-<commit>``, e.g. ``releases/0.1.0-bfec187``), under
a lock, so that two workers or two checkouts asking at once build it once. A folder
without its ``.complete`` (a build cut short) is made again.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness.machine import ROOT, file_lock
from harness.spark_drivers import CACHE

RELEASES = CACHE / "releases"


@dataclass(frozen=True)
class Release:
    """A release as ``releases.toml`` records it."""

    version: str
    commit: str

    @property
    def key(self) -> str:
        """Its folder's name in the cache: ``0.1.0-bfec187``."""
        return f"{self.version}-{self.commit[:7]}"


@dataclass(frozen=True)
class BuiltRelease:
    """A release's artifacts, and the service installed from its wheel."""

    release: Release
    folder: Path
    service_wheel: Path
    listener_wheel: Path
    listener_jar: Path  # the JVM listener, named as a release names it
    python: Path  # its virtualenv's: ``python -m spark_offset_sidecar.cli serve`` runs it
    listener_path: Path  # the Python listener's wheel unpacked: first on a driver's sys.path


def recorded_releases(root: Path = ROOT) -> list[Release]:
    """Every release of ``releases.toml`` recorded with its commit, newest first."""
    entries = tomllib.loads((root / "releases.toml").read_text())["release"]
    return [Release(e["version"], e["commit"]) for e in entries if e.get("commit")]


def previous_release(root: Path = ROOT) -> Release:
    """The newest recorded release other than the one this tree builds (``releases.toml``'s
    first entry): what an upgrade to this tree starts from."""
    building = tomllib.loads((root / "releases.toml").read_text())["release"][0]["version"]
    for release in recorded_releases(root):
        if release.version != building:
            return release
    raise LookupError("releases.toml records no release before this tree's with its commit")


def built_release(release: Release) -> BuiltRelease:
    """``release`` built (once per machine) and installed: see the module's docstring."""
    folder = RELEASES / release.key
    RELEASES.mkdir(parents=True, exist_ok=True)
    with file_lock(RELEASES / f"{release.key}.lock"):
        if not (folder / ".complete").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            _build(release, folder)
            (folder / ".complete").write_text(f"{release.version} {release.commit}\n")
    dist = folder / "dist"
    return BuiltRelease(
        release,
        folder,
        service_wheel=_one(dist, "spark_offset_sidecar-*.whl"),
        listener_wheel=_one(dist, "spark_offset_listener-*.whl"),
        listener_jar=dist / f"spark-offset-sidecar-listener-{release.version}.jar",
        python=folder / "venv" / "bin" / "python",
        listener_path=folder / "listener",
    )


def _build(release: Release, folder: Path) -> None:
    source, dist = folder / "source", folder / "dist"
    sources(release, source)
    uv = _uv()
    for project in (source, source / "jobs"):
        _run(uv, "build", "-q", "--wheel", "--out-dir", dist, project)
    _jar(release, source, dist)
    _run(uv, "venv", "-q", "--python", sys.executable, folder / "venv")
    wheel = _one(dist, "spark_offset_sidecar-*.whl")
    _run(uv, "pip", "install", "-q", "--python", folder / "venv" / "bin" / "python",
         f"{wheel}[postgres]")  # fmt: skip
    with zipfile.ZipFile(_one(dist, "spark_offset_listener-*.whl")) as listener:
        listener.extractall(folder / "listener")


def sources(release: Release, source: Path) -> None:
    """The release's tree from git: refused, saying what to do, if this clone lacks it."""
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{release.commit}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    if known.returncode != 0:
        shallow = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        hint = " (this clone is shallow: git fetch --unshallow)" if shallow == "true" else ""
        raise RuntimeError(
            f"release {release.version} is commit {release.commit} (releases.toml), which "
            f"this clone of {ROOT} does not have{hint}: fetch it (git fetch origin "
            f"{release.commit}, or clone without --depth) and run again"
        )
    archive = subprocess.run(["git", "archive", release.commit], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {release.commit}: {archive.stderr.decode()[-2000:]}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tree:
        tree.extractall(source, filter="data")


def _jar(release: Release, source: Path, dist: Path) -> None:
    """The JVM listener by the release's POM (this checkout's way of running Maven)."""
    project = source / "jobs" / "jvm-listener"
    settings = ROOT / "scripts" / "maven" / "settings.xml"
    _run("bash", ROOT / "scripts" / "mvn.sh", "-B", "-q", "-Dstyle.color=never", "-s", settings,
         "-f", project / "pom.xml", "package")  # fmt: skip
    built = [
        jar
        for jar in (project / "target").glob("*.jar")
        if not jar.name.endswith(("-sources.jar", "-javadoc.jar"))
    ]
    assert len(built) == 1, f"the POM of {release.version} built {built}"
    shutil.copy2(built[0], dist / f"spark-offset-sidecar-listener-{release.version}.jar")


def _uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def _run(*command: str | Path) -> None:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, command))} failed:\n{(done.stdout + done.stderr)[-4000:]}"
        )


def _one(folder: Path, pattern: str) -> Path:
    (found,) = folder.glob(pattern)
    return found
