"""``make dist`` as a release manager runs it (``scripts/dist.py``, once per test run: the
``release_folder`` fixture), and its folder as a user receives it: every artifact there and
nothing else, the checksums verify (and catch a changed byte), every artifact says the
one version, each SBOM names what its artifact ships, and the chart archive renders the
image of that version. Installing from the folder is tested where the suite already
installs: the service's wheel in a clean virtualenv (``test_packaging.py``), the
listener's wheel under a real PySpark job (``test_listener_wheel.py``), the image loaded
from its archive and run as the chart's pod (``test_container.py``)."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import venv
import zipfile
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

from tests.support.helm import helm
from tests.support.manual import shell_blocks
from tests.support.release import build_info, one
from tests.unit.test_docs import PAGES

versions = importlib.import_module("release")  # scripts/release.py: harness puts it on the path


def _names(info: dict[str, Any]) -> set[str]:
    """Every file a release folder of ``info``'s versions holds."""
    version, chart = info["version"], info["chart"]
    assert str(Version(version)) == version, "a version Python's tools keep as it is"
    jar = f"spark-offset-sidecar-listener-{version}"
    return {
        f"spark_offset_sidecar-{version}-py3-none-any.whl",
        f"spark_offset_sidecar-{version}.tar.gz",
        f"spark_offset_sidecar-{version}.cdx.json",
        f"spark_offset_listener-{version}-py3-none-any.whl",
        f"spark_offset_listener-{version}.cdx.json",
        f"{jar}.jar",
        f"{jar}-sources.jar",
        f"{jar}-javadoc.jar",
        f"{jar}.pom",
        f"{jar}.cdx.json",
        f"spark-offset-sidecar-{chart}.tgz",
        f"spark-offset-sidecar-image-{version}.oci.tar",
        f"spark-offset-sidecar-image-{version}.cdx.json",
        "build.json",
        "SHA256SUMS",
    }


def test_the_folder_holds_every_artifact_and_its_checksums_verify(
    release_folder: Path, tmp_path: Path
) -> None:
    tree_version = versions.tree_version
    info = build_info(release_folder)
    assert info["tree_version"] == tree_version()
    assert info["release"] or re.fullmatch(rf"{re.escape(tree_version())}\.dev\d+", info["version"])
    assert {p.name for p in release_folder.iterdir()} == _names(info)
    listed = [
        line.split(maxsplit=1)[1]
        for line in (release_folder / "SHA256SUMS").read_text().splitlines()
    ]
    assert sorted(listed) == sorted(_names(info) - {"SHA256SUMS"})
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=release_folder, capture_output=True
    )
    assert checked.returncode == 0, checked.stdout
    # the check catches one changed byte
    shutil.copy(release_folder / "SHA256SUMS", tmp_path)
    shutil.copy(release_folder / "build.json", tmp_path)
    with (tmp_path / "build.json").open("a") as changed:
        changed.write(" ")
    copy = subprocess.run(
        ["sha256sum", "-c", "--ignore-missing", "SHA256SUMS"], cwd=tmp_path, capture_output=True
    )
    assert copy.returncode != 0


def _zip_text(archive: Path, name: str) -> str:
    with zipfile.ZipFile(archive) as opened:
        return opened.read(name).decode()


def _image_labels(archive: Path) -> dict[str, str]:
    """The image's labels, read from the OCI archive's index, manifest and config."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict[str, Any]:
            found: dict[str, Any] = json.load(tar.extractfile(f"blobs/sha256/{digest[7:]}"))  # type: ignore[arg-type]
            return found

        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        manifest = blob(index["manifests"][0]["digest"])
        labels: dict[str, str] = blob(manifest["config"]["digest"])["config"]["Labels"]
        return labels


def test_every_artifact_says_the_version(release_folder: Path) -> None:
    info = build_info(release_folder)
    version = info["version"]
    wheel = one(release_folder, "spark_offset_sidecar-*.whl")
    metadata = _zip_text(wheel, f"spark_offset_sidecar-{version}.dist-info/METADATA")
    assert f"\nVersion: {version}\n" in metadata
    # offset-sidecar --version prints the package's __version__ (test_packaging runs it)
    assert f'__version__ = "{version}"' in _zip_text(wheel, "spark_offset_sidecar/__init__.py")
    with tarfile.open(one(release_folder, "spark_offset_sidecar-*.tar.gz")) as sdist:
        pkg_info = sdist.extractfile(f"spark_offset_sidecar-{version}/PKG-INFO")
        assert pkg_info is not None
        assert f"\nVersion: {version}\n" in pkg_info.read().decode()
    listener = one(release_folder, "spark_offset_listener-*.whl")
    # the listener's User-Agent is made of its __version__ (tests/listener/test_sender.py)
    assert f'__version__ = "{version}"' in _zip_text(listener, "spark_offset_listener/__init__.py")

    jar = release_folder / f"spark-offset-sidecar-listener-{version}.jar"
    manifest = _zip_text(jar, "META-INF/MANIFEST.MF")
    assert f"Implementation-Version: {version}\r\n" in manifest
    sources = zipfile.ZipFile(
        release_folder / f"spark-offset-sidecar-listener-{version}-sources.jar"
    )
    assert "dev/sparkoffsetsidecar/listener/ProgressSender.java" in sources.namelist()
    javadoc = zipfile.ZipFile(
        release_folder / f"spark-offset-sidecar-listener-{version}-javadoc.jar"
    )
    assert "index.html" in javadoc.namelist()
    pom = (release_folder / f"spark-offset-sidecar-listener-{version}.pom").read_text()
    assert (
        f"<artifactId>spark-offset-sidecar-listener</artifactId>\n  <version>{version}</version>"
        in pom
    )

    with tarfile.open(release_folder / f"spark-offset-sidecar-{info['chart']}.tgz") as chart:
        member = chart.extractfile("spark-offset-sidecar/Chart.yaml")
        assert member is not None
        described = yaml.safe_load(member)
    assert (described["version"], described["appVersion"]) == (info["chart"], version)

    labels = _image_labels(release_folder / f"spark-offset-sidecar-image-{version}.oci.tar")
    assert labels["org.opencontainers.image.version"] == version
    revision = labels["org.opencontainers.image.revision"]
    assert revision == info["commit"] + ("-dirty" if info["dirty"] else "")


def _components(sbom: Path) -> dict[str, set[str]]:
    """A CycloneDX SBOM's components: {name: {versions}}."""
    document = json.loads(sbom.read_text())
    assert document["bomFormat"] == "CycloneDX"
    found: dict[str, set[str]] = {}
    for component in document.get("components", []):
        found.setdefault(component["name"].lower(), set()).add(component.get("version", ""))
    return found


def test_each_sbom_names_what_its_artifact_ships(release_folder: Path) -> None:
    info = build_info(release_folder)
    version = info["version"]
    service = _components(release_folder / f"spark_offset_sidecar-{version}.cdx.json")
    assert service["spark-offset-sidecar"] == {version}
    for needed in ("fastapi", "uvicorn", "aiokafka", "sqlalchemy", "alembic", "pydantic"):
        assert needed in service, f"the service's SBOM lacks {needed}"
    assert "psycopg" not in service, "an extra is not what the wheel requires"
    listener = _components(release_folder / f"spark_offset_listener-{version}.cdx.json")
    assert listener == {"spark-offset-listener": {version}}, "the listener has no dependency"
    jar = json.loads(
        (release_folder / f"spark-offset-sidecar-listener-{version}.cdx.json").read_text()
    )
    assert jar["metadata"]["component"]["version"] == version
    built_against = {c["name"] for c in jar["components"]}
    assert {"spark-sql_2.12", "slf4j-api"} <= built_against
    image = json.loads(
        (release_folder / f"spark-offset-sidecar-image-{version}.cdx.json").read_text()
    )
    purls = {c.get("purl", "").split("@")[0] for c in image["components"]}
    assert {c["version"] for c in image["components"] if c["name"] == "spark-offset-sidecar"} == {
        version
    }
    # the image's extras (the Dockerfile's EXTRAS) and its Debian base are in it too
    assert {"pkg:pypi/psycopg", "pkg:pypi/aiokafka", "pkg:deb/debian/python3.11"} <= purls


def test_the_chart_archive_renders_the_image_of_its_version(release_folder: Path) -> None:
    info = build_info(release_folder)
    rendered = subprocess.run(
        [
            helm(),
            "template",
            "sidecar",
            str(release_folder / f"spark-offset-sidecar-{info['chart']}.tgz"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    images = set(re.findall(r"image: \"?([^\"\s]+)", rendered))
    assert images == {f"spark-offset-sidecar:{info['version']}"}


THIS = "tests/e2e/test_dist.py::test_the_install_pages_steps_run_in_a_release_folder"


def test_the_install_pages_steps_run_in_a_release_folder(
    release_folder: Path, tmp_path: Path
) -> None:
    """Every shell block of the manual that names this test, run as a user with no clone
    runs it: in a folder holding only the release's files, with a Python of their own
    (``pip``, ``python``); ``VERSION=`` is the folder's version, ``/opt/sidecar`` a
    folder of the test's."""
    info = build_info(release_folder)
    folder = tmp_path / "received"
    folder.mkdir()
    for artifact in release_folder.iterdir():
        (folder / artifact.name).symlink_to(artifact)
    user = tmp_path / "python"
    venv.create(user, with_pip=True)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = f"{user / 'bin'}:/usr/bin:/bin"
    printed, blocks = "", 0
    for page in PAGES:
        for block in shell_blocks(page):
            if THIS not in block.above:
                continue
            script = "set -euo pipefail\n" + "\n".join(block.commands)
            script = re.sub(r"^VERSION=\S+", f"VERSION={info['version']}", script, flags=re.M)
            script = script.replace("/opt/sidecar", str(tmp_path / "opt-sidecar"))
            done = subprocess.run(
                ["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, f"{page.name}:{block.line}\n{done.stdout}{done.stderr}"
            printed += done.stdout
            blocks += 1
    assert blocks >= 4, "the pages that install from a release name this test"
    assert f"offset-sidecar {info['version']}\n" in printed  # run/service.md
    assert f"Implementation-Version: {info['version']}" in printed  # the jar's page
    assert f"\n{info['version']}\n" in f"\n{printed}"  # the Python listener's page
