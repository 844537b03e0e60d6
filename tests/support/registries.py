"""A release published to real registry servers (``harness.registries``) with each
ecosystem's own tool, as a maintainer publishes it (docs/versions.md, "Publish a
release"): ``twine check --strict`` and ``twine upload`` to a package index, ``mvn
deploy:deploy-file`` to a Maven repository, ``crane push`` of the image's archive and
``helm push`` of the chart to an OCI registry. What a reader sets to install from them is
``reader_env``: the variables the manual's install pages ask for."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from harness.registries import MavenRepository, OciRegistry, PackageIndex, crane
from tests.support.helm import helm
from tests.support.release import build_info, one

BIN = Path(sys.executable).parent
IMAGE = "spark-offset-sidecar"  # the image's name in the registry
CHARTS = "charts"  # helm push oci://REGISTRY/charts: the chart is REGISTRY/charts/<name>


def _run(*command: str | Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"{' '.join(map(str, command))}:\n{done.stdout}{done.stderr}"
    return done.stdout


def publish_python(release: Path, index: PackageIndex) -> None:
    """The release's wheels and sdist, checked as PyPI checks them, then uploaded."""
    files = sorted(release.glob("*.whl")) + sorted(release.glob("*.tar.gz"))
    _run(BIN / "twine", "check", "--strict", *files)
    _run(
        BIN / "twine", "upload", "--non-interactive", "--disable-progress-bar",
        "--repository-url", index.url, "-u", "publisher", "-p", "unchecked", *files,
    )  # fmt: skip


def publish_jvm(release: Path, repository: MavenRepository) -> None:
    """The JVM listener's jar with its POM, sources and javadoc jars."""
    version = build_info(release)["version"]
    stem = release / f"spark-offset-sidecar-listener-{version}"
    repository.deploy(
        Path(f"{stem}.jar"), Path(f"{stem}.pom"),
        Path(f"{stem}-sources.jar"), Path(f"{stem}-javadoc.jar"),
    )  # fmt: skip


def publish_oci(release: Path, registry: OciRegistry, work: Path) -> None:
    """The image's OCI archive pushed by tag with crane, as it is (the registry serves
    the archive's own manifest digest; nothing enters this machine's podman storage,
    which every run shares); the chart's archive pushed with helm. Both over HTTP: the
    registry is on loopback."""
    version = build_info(release)["version"]
    layout = work / "image"
    with tarfile.open(one(release, "spark-offset-sidecar-image-*.oci.tar")) as archive:
        archive.extractall(layout, filter="data")
    _run(crane(), "push", "--insecure", layout, f"{registry.host}/{IMAGE}:{version}")
    chart = one(release, "spark-offset-sidecar-*.tgz")
    _run(helm(), "push", chart, f"oci://{registry.host}/{CHARTS}", "--plain-http")


def reader_env(
    tmp_path: Path,
    *,
    index: PackageIndex | None = None,
    maven: MavenRepository | None = None,
    oci: OciRegistry | None = None,
) -> dict[str, str]:
    """This process's environment as a reader's: with the variables a reader sets for the
    install pages (docs/versions.md, "Where a release is published") naming these
    servers, the OCI registry named in ``registries.conf`` as one podman may reach over
    HTTP (a reader's registry has TLS), and none of this machine's own places for
    wheels."""
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "VIRTUAL_ENV")}
    if index is not None:
        env["PIP_INDEX_URL"] = index.simple
    if maven is not None:
        env["MAVEN_REPOSITORY"] = maven.url
    if oci is not None:
        env["OCI_REGISTRY"] = oci.host
        conf = tmp_path / "registries.conf"
        conf.write_text(f'[[registry]]\nlocation = "{oci.host}"\ninsecure = true\n')
        env["CONTAINERS_REGISTRIES_CONF"] = str(conf)
    return env
