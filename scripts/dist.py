"""``make dist``: a release of this tree in one folder, ``dist/<version>/``.

    python scripts/dist.py [--out DIR] [--release] [--keep-image]

It holds the service's wheel and sdist, the Python listener's wheel, the JVM listener's
jar with its sources jar, javadoc jar and POM (named as Maven Central takes them), the
chart packaged by ``helm package``, the image as an OCI archive (built as the suite
builds it: ``harness/pod.py``), a CycloneDX SBOM of each (cyclonedx-py for the Python
artifacts, the cyclonedx-maven-plugin for the jar, syft for the image), ``build.json``
(what was built, from which commit) and ``SHA256SUMS`` over all of them
(``sha256sum -c SHA256SUMS`` in the folder checks them).

Everything is built from a copy of the tree's files (tracked, and untracked ones git does
not ignore), never in the checkout. Which version they carry is ``scripts/release.py``'s
rule: the release's from the clean commit that dates it in releases.toml, else a
development build's ``<version>-dev<N>`` (``--release`` refuses that). The folder appears
whole or not at all.

Every file is stamped with the commit's time (``SOURCE_DATE_EPOCH``), never the clock's:
the copy's files, the wheels', sdist's, jars' and chart's entries, the image's layers and
the SBOMs' timestamps, so that the same commit builds the same bytes wherever what it
resolves from the registries has not moved (``python scripts/release.py verify`` compares
a folder with the checksums recorded when the release was cut).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # harness: the image is built as the suite builds it

import release  # noqa: E402  (scripts/, on the path as this script's folder)

from harness.machine import machine_lock  # noqa: E402
from harness.pod import build_image, podman  # noqa: E402

BIN = Path(sys.executable).parent  # the project's virtualenv: uv, cyclonedx-py
TOOLS = ROOT / ".local" / "bin"  # make tools: helm; syft on first use (below)
IMAGE = "localhost/spark-offset-sidecar"
LISTENER_JAR = "spark-offset-sidecar-listener"


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run ``command`` (``SOURCE_DATE_EPOCH`` the commit's time: ``EPOCH``); on failure exit
    naming it, with the end of its output."""
    done = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env={**(env or os.environ), "SOURCE_DATE_EPOCH": str(EPOCH)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(
            f"dist: {' '.join(map(str, command))} failed:\n{(done.stdout + done.stderr)[-4000:]}"
        )
    return done.stdout


def commit_time() -> int:
    """HEAD's commit time, the time every built file carries (0 outside a git checkout)."""
    done = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True)
    return int(done.stdout or 0) if done.returncode == 0 else 0


EPOCH = commit_time()


def stage(target: Path, build: release.Build) -> Path:
    """A copy of the files the tree holds, stamped with the build's version, every file
    and folder dated ``EPOCH`` and readable by all (a clone's umask changes neither)."""
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the tree is left out
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / name)
            (target / name).chmod(0o755 if os.access(source, os.X_OK) else 0o644)
    release.stamp(target, {"version": build.version, "chart": build.chart})
    for path in sorted(target.rglob("*"), reverse=True):
        if path.is_dir():
            path.chmod(0o755)
        os.utime(path, (EPOCH, EPOCH))
    return target


def archive_dated(archive: Path) -> None:
    """A tar (``.tgz``, ``.tar.gz``: gzipped) rewritten with every entry dated ``EPOCH``,
    in the same order, owned by root: ``helm package``, setuptools' sdist and ``podman
    save`` date what they write with the clock (Python's gzip header too)."""
    zipped = archive.name.endswith((".tgz", ".tar.gz"))
    dated_path = archive.with_name(archive.name + ".dated")
    with contextlib.ExitStack() as files:
        source = files.enter_context(tarfile.open(archive))
        out = files.enter_context(dated_path.open("wb"))
        if zipped:
            out = files.enter_context(
                gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=EPOCH)
            )
        dated = files.enter_context(tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT))
        for member in source.getmembers():
            member.mtime, member.uid, member.gid, member.uname, member.gname = EPOCH, 0, 0, "", ""
            member.pax_headers = {}
            dated.addfile(member, source.extractfile(member) if member.isfile() else None)
    dated_path.replace(archive)


def sbom_dated(sbom: Path) -> None:
    """A CycloneDX SBOM with its timestamp ``EPOCH``, its serial number made of its
    content, not of the clock and chance (the SBOM tools write both anew each run), and a
    file's address on the build machine (``file:///...``) as the file's name alone."""
    document = json.loads(sbom.read_text())

    def local_files_named(node: object) -> None:
        if isinstance(node, dict):
            url = node.get("url")
            if isinstance(url, str) and url.startswith("file://"):
                node["url"] = url.rsplit("/", 1)[-1]
            for value in node.values():
                local_files_named(value)
        elif isinstance(node, list):
            for value in node:
                local_files_named(value)

    local_files_named(document)
    document.get("metadata", {})["timestamp"] = datetime.fromtimestamp(EPOCH, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    document.pop("serialNumber", None)
    content = json.dumps(document, sort_keys=True).encode()
    serial = uuid.uuid5(uuid.NAMESPACE_URL, hashlib.sha256(content).hexdigest())
    sbom.write_text(json.dumps({**document, "serialNumber": f"urn:uuid:{serial}"}, indent=2) + "\n")


def python_sbom(wheel: Path, out: Path, work: Path) -> None:
    """What ``wheel`` brings when installed (its required dependencies, resolved now) in
    an environment of its own, read by cyclonedx-py."""
    env_dir = work / f"sbom-{wheel.name}"
    run(BIN / "uv", "venv", "-q", "--python", sys.executable, env_dir)
    python = env_dir / "bin" / "python"
    run(BIN / "uv", "pip", "install", "-q", "--python", python, wheel)
    run(BIN / "cyclonedx-py", "environment", "--mc-type", "library", "--output-reproducible",
        "-o", out, python)  # fmt: skip
    sbom_dated(out)


def python_artifacts(source: Path, out: Path, work: Path) -> None:
    """The service's sdist and its wheel (built from the sdist), the listener's wheel."""
    built = work / "python"  # uv build leaves a .gitignore beside what it builds
    run(BIN / "uv", "build", "-q", "--sdist", "--wheel", "--out-dir", built, source)
    run(BIN / "uv", "build", "-q", "--wheel", "--out-dir", built, source / "jobs")
    for artifact in [*built.glob("*.whl"), *built.glob("*.tar.gz")]:
        shutil.copy2(artifact, out / artifact.name)
    for sdist in out.glob("*.tar.gz"):
        archive_dated(sdist)
    for wheel in sorted(out.glob("*.whl")):
        stem = "-".join(wheel.name.split("-")[:2])  # name-version
        python_sbom(wheel, out / f"{stem}.cdx.json", work)


def jvm_artifacts(source: Path, out: Path, version: str) -> None:
    """The JVM listener with Maven's release profile: the jar (its manifest names the
    version), sources and javadoc jars, the POM, and the plugin's SBOM."""
    project = source / "jobs" / "jvm-listener"
    settings = ROOT / "scripts" / "maven" / "settings.xml"
    run(ROOT / "scripts" / "mvn.sh", "-B", "-q", "-Dstyle.color=never", "-s", settings,
        f"-Dproject.build.outputTimestamp={EPOCH}",
        "-f", project / "pom.xml", "-Prelease", "package")  # fmt: skip
    target = project / "target"
    name = f"{LISTENER_JAR}-{version}"
    for built, shipped in [
        (f"{LISTENER_JAR}.jar", f"{name}.jar"),
        (f"{LISTENER_JAR}-sources.jar", f"{name}-sources.jar"),
        (f"{LISTENER_JAR}-javadoc.jar", f"{name}-javadoc.jar"),
        ("bom.json", f"{name}.cdx.json"),
    ]:
        shutil.copy2(target / built, out / shipped)
    sbom_dated(out / f"{name}.cdx.json")
    shutil.copy2(project / "pom.xml", out / f"{name}.pom")


def chart(source: Path, out: Path) -> None:
    run(TOOLS / "helm", "package", "-d", out, source / "helm" / "spark-offset-sidecar")
    for packaged in out.glob("spark-offset-sidecar-*.tgz"):
        archive_dated(packaged)


def image(source: Path, out: Path, build: release.Build, keep: bool) -> None:
    """The Dockerfile built on the suite's Debian base, saved as an OCI archive, and its
    SBOM read from that archive by syft. The image is removed after, unless ``keep``."""
    tag = f"{IMAGE}:{build.version}"
    revision = (build.commit or "unknown") + ("-dirty" if build.dirty else "")
    archive = out / f"spark-offset-sidecar-image-{build.version}.oci.tar"
    with machine_lock(f"image-{build.version}"):  # one tag, maybe other checkouts
        build_image(
            source,
            tag,
            {"VERSION": build.version, "REVISION": revision, "SOURCE_DATE_EPOCH": str(EPOCH)},
        )
        try:
            podman("save", "--format", "oci-archive", "-o", str(archive), tag)
        finally:
            if not keep:
                podman("rmi", tag, check=False)
    archive_dated(archive)
    # packages only (Debian's and Python's): without this, every file is a component too
    env = {
        **os.environ,
        "SYFT_CHECK_FOR_APP_UPDATE": "false",
        "SYFT_FILE_METADATA_SELECTION": "none",
    }
    if not (TOOLS / "syft").exists():  # built on first use: minutes of compiling, once
        run("make", "-C", str(ROOT), ".local/bin/syft")
    run(TOOLS / "syft", "scan", "-q", f"oci-archive:{archive}",
        "--source-name", "spark-offset-sidecar", "--source-version", build.version,
        "-o", f"cyclonedx-json={out / f'spark-offset-sidecar-image-{build.version}.cdx.json'}",
        env=env)  # fmt: skip
    sbom_dated(out / f"spark-offset-sidecar-image-{build.version}.cdx.json")


def checksums(out: Path) -> None:
    """SHA256SUMS, as ``sha256sum`` writes it, over every file of the folder."""
    names = sorted(p.name for p in out.iterdir() if p.name != "SHA256SUMS")
    (out / "SHA256SUMS").write_text(run("sha256sum", "--", *names, cwd=out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="the folder (default dist/<version>)")
    parser.add_argument("--release", action="store_true", help="refuse a development build")
    parser.add_argument("--keep-image", action="store_true", help="keep the image in podman")
    args = parser.parse_args()
    started = time.monotonic()
    try:
        build = release.build(ROOT, release_only=args.release)
    except release.Refused as refused:
        print(f"dist: refused: {refused}", file=sys.stderr)
        return 2
    kind = "release" if build.release else f"development build ({build.why})"
    print(f"dist: {build.version}, a {kind}", file=sys.stderr)
    out: Path = (args.out or ROOT / "dist" / build.version).resolve()
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="dist-") as work:
        source = stage(Path(work) / "src", build)
        python_artifacts(source, partial, Path(work))
        jvm_artifacts(source, partial, build.version)
        chart(source, partial)
        image(source, partial, build, args.keep_image)
        shutil.copy2(source / "CHANGELOG.md", partial / "CHANGELOG.md")  # its upgrade notes
    (partial / "build.json").write_text(json.dumps(asdict(build), indent=2) + "\n")
    checksums(partial)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    for path in sorted(out.iterdir()):
        print(f"{path.stat().st_size:>12,}  {path}")
    print(f"dist: {out} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
