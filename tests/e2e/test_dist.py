"""``make dist`` as a release manager runs it (``scripts/dist.py``, once per test run: the
``release_folder`` fixture), and its folder as a user receives it: every artifact there and
nothing else, the checksums verify (and catch a changed byte), every artifact says the
one version, each SBOM names what its artifact ships, and the chart archive renders the
image of that version; each artifact has what its public registry requires (PyPI's
``twine check``, Maven Central's POM, Artifact Hub's annotations), and a maintainer signs
the JVM listener as the page says. Installing from the folder is tested where the suite
already installs: the service's wheel in a clean virtualenv (``test_packaging.py``), the
image imported from its archive and run as the chart's pod on a real kubelet
(``test_kubernetes_node.py``; loaded by podman, ``test_container.py``); the
pages' air-gapped steps in the newest release's folder (below). The release published to
registries and installed from them by version: ``test_registries.py``. The image trusts
what Debian's ``ca-certificates`` trusts, none of the build machine's own CA
certificates."""

from __future__ import annotations

import importlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

from harness.machine import ROOT
from tests.support.helm import helm
from tests.support.manual import shell_blocks
from tests.support.release import build_info, one
from tests.unit.test_docs import DOCS, PAGES

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
        "CHANGELOG.md",
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


def _blob(archive: tarfile.TarFile, digest: str) -> tarfile.ExFileObject:
    """A blob of an OCI archive (``sha256:...``)."""
    found = archive.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}")
    assert found is not None, digest
    return found


def _manifest(archive: tarfile.TarFile) -> dict[str, Any]:
    """The manifest of an OCI archive's one image."""
    index = json.load(archive.extractfile("index.json"))  # type: ignore[arg-type]
    manifest: dict[str, Any] = json.load(_blob(archive, index["manifests"][0]["digest"]))
    return manifest


def _image_config(archive: Path) -> dict[str, Any]:
    """The image's configuration (labels, environment...), read from the OCI archive's
    index, manifest and config."""
    with tarfile.open(archive) as tar:
        config: dict[str, Any] = json.load(_blob(tar, _manifest(tar)["config"]["digest"]))
        return dict(config["config"])


def _image_files(archive: Path, wanted: Callable[[str], bool]) -> dict[str, bytes]:
    """The image's files whose path (``etc/...``) is ``wanted``, as the image's root holds
    them: its layers applied in order from the OCI archive, whiteouts (``.wh.<name>``) and
    opaque folders (``.wh..wh..opq``) honoured, symbolic links followed."""
    files: dict[str, bytes | None] = {}  # the content of those wanted
    links: dict[str, str] = {}
    with tarfile.open(archive) as outer:
        for layer in _manifest(outer)["layers"]:
            layers_own: set[str] = set()  # an opaque folder keeps what its own layer adds
            with tarfile.open(fileobj=_blob(outer, layer["digest"]), mode="r:*") as tar:
                for member in tar:
                    path = posixpath.normpath(member.name.removeprefix("./").lstrip("/"))
                    folder, name = posixpath.split(path)
                    gone: list[str] = [path]  # a file or link replaces what was there
                    if name == ".wh..wh..opq":  # the folder's earlier content is hidden
                        gone = [p for p in [*files, *links] if p.startswith(f"{folder}/")]
                        gone = [p for p in gone if p not in layers_own]
                    elif name.startswith(".wh."):  # the name is deleted, with all below it
                        removed = posixpath.join(folder, name.removeprefix(".wh."))
                        gone = [p for p in [*files, *links] if f"{p}/".startswith(f"{removed}/")]
                    for each in gone:
                        files.pop(each, None)
                        links.pop(each, None)
                    if name.startswith(".wh."):
                        continue
                    layers_own.add(path)
                    if member.issym():
                        links[path] = posixpath.normpath(
                            posixpath.join(folder, member.linkname).lstrip("/")
                        )
                    elif member.isfile() or member.islnk():  # a hard link: its target's
                        content = tar.extractfile(member) if wanted(path) else None
                        files[path] = content.read() if content else None
    found: dict[str, bytes] = {}
    for path in filter(wanted, [*files, *links]):
        target, hops = path, 0
        while target in links and hops < 40:
            target, hops = links[target], hops + 1
        content = files.get(target)
        assert content is not None, f"{path} leads to {target}, not a file read here"
        found[path] = content
    return found


def _certificates(pem: bytes) -> list[str]:
    """The certificates of a PEM text, each as its base64 body (the DER), whitespace
    removed: one certificate compares equal whatever its comments and line breaks."""
    bodies = re.findall(
        rb"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", pem, flags=re.S
    )
    return [b"".join(body.split()).decode() for body in bodies]


BUNDLE = "etc/ssl/certs/ca-certificates.crt"
DEBIANS = "usr/share/ca-certificates/mozilla/"
LOCAL = "usr/local/share/ca-certificates/"
# What points pip, OpenSSL or requests at a CA bundle.
TRUST_SETTINGS = {"PIP_CERT", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"}


def test_the_image_trusts_debians_certificates_alone(release_folder: Path) -> None:
    """The image's CA bundle is what Debian's ``ca-certificates`` makes of its own
    certificates (``update-ca-certificates`` bundles every one of ``mozilla/`` by
    default), none of this machine's local CA certificates, which the image's build
    stage uses to reach the package index (``harness/pod.py``); nothing in the image's
    configuration points pip or OpenSSL at another bundle."""
    version = build_info(release_folder)["version"]
    archive = release_folder / f"spark-offset-sidecar-image-{version}.oci.tar"
    files = _image_files(archive, lambda p: p == BUNDLE or p.startswith((DEBIANS, LOCAL)))
    local = sorted(p for p in files if p.startswith(LOCAL))
    assert local == [], f"the image holds local CA certificates: {local}"
    bundle = _certificates(files[BUNDLE])
    machines = {c for p in Path("/", LOCAL).glob("*.crt") for c in _certificates(p.read_bytes())}
    assert not machines & set(bundle), "a CA certificate of this machine is in the image's bundle"
    debians = [c for p, pem in files.items() if p.startswith(DEBIANS) for c in _certificates(pem)]
    assert len(debians) > 100, "Debian's ca-certificates in the image"
    assert sorted(bundle) == sorted(debians), "the bundle is Debian's certificates, no more"
    environment = dict(e.split("=", 1) for e in _image_config(archive).get("Env", []))
    pointed = {k: v for k, v in environment.items() if k in TRUST_SETTINGS}
    assert set(pointed.values()) <= {f"/{BUNDLE}"}, pointed


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

    archive = release_folder / f"spark-offset-sidecar-image-{version}.oci.tar"
    labels = _image_config(archive)["Labels"]
    assert labels["org.opencontainers.image.version"] == version
    revision = labels["org.opencontainers.image.revision"]
    assert revision == info["commit"] + ("-dirty" if info["dirty"] else "")


def _metadata_fields(metadata: str) -> dict[str, list[str]]:
    """A wheel's METADATA headers (before the long description): {field: [values]}."""
    fields: dict[str, list[str]] = {}
    for line in metadata.split("\n\n", 1)[0].splitlines():
        if ": " in line and not line.startswith(" "):
            name, value = line.split(": ", 1)
            fields.setdefault(name, []).append(value)
    return fields


def test_the_python_distributions_pass_what_pypi_checks(release_folder: Path) -> None:
    """``twine check --strict`` (what PyPI refuses, warnings included: a missing long
    description) on the service's wheel and sdist and the listener's wheel; and both
    wheels carry the licence and the project's URLs (releases.toml's ``[project]``)."""
    version = build_info(release_folder)["version"]
    service = release_folder / f"spark_offset_sidecar-{version}-py3-none-any.whl"
    sdist = release_folder / f"spark_offset_sidecar-{version}.tar.gz"
    listener = release_folder / f"spark_offset_listener-{version}-py3-none-any.whl"
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", service, sdist, listener],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 3, checked.stdout
    addresses = versions.addresses()
    for wheel, name in [(service, "spark_offset_sidecar"), (listener, "spark_offset_listener")]:
        metadata = _zip_text(wheel, f"{name}-{version}.dist-info/METADATA")
        fields = _metadata_fields(metadata)
        assert fields["License-Expression"] == ["Apache-2.0"], wheel.name
        assert fields["License-File"] == ["LICENSE"], wheel.name
        assert sorted(fields["Project-URL"]) == sorted(
            [
                f"Homepage, {addresses['home']}",
                f"Source, {addresses['home']}",
                f"Documentation, {addresses['manual']}",
            ]
        ), wheel.name
        assert fields["Description-Content-Type"] == ["text/markdown"], wheel.name
    listener_metadata = _zip_text(listener, f"spark_offset_listener-{version}.dist-info/METADATA")
    description = listener_metadata.split("\n\n", 1)[1]
    assert description.startswith("# spark-offset-listener\n")
    # the install block names the newest release, as every page does (release.py stamps
    # it): the wheel's own version in a release
    released = versions.released_versions()["version"]
    assert f"\nVERSION={released}\npip install ./spark_offset_listener-$VERSION-" in description
    assert "spark.streams.addListener(OffsetCommitListener(" in description


POM = {"m": "http://maven.apache.org/POM/4.0.0"}
# What Maven Central requires of a POM (https://central.sonatype.org/publish/requirements/)
CENTRAL = [
    "groupId",
    "artifactId",
    "version",
    "name",
    "description",
    "url",
    "licenses/license/name",
    "licenses/license/url",
    "developers/developer/name",
    "scm/connection",
    "scm/developerConnection",
    "scm/url",
]


def test_the_jvm_listener_has_what_maven_central_requires(release_folder: Path) -> None:
    """Every element Central requires, present and not empty, in the POM as shipped; the
    jar, sources and javadoc jars (their content: ``test_every_artifact_says_the_version``)
    named by its coordinates, as Central takes them."""
    version = build_info(release_folder)["version"]
    pom = ET.parse(release_folder / f"spark-offset-sidecar-listener-{version}.pom").getroot()
    for path in CENTRAL:
        found = pom.findall("m:" + "/m:".join(path.split("/")), POM)
        assert found, f"the POM has no <{path}>"
        assert all((e.text or "").strip() for e in found), f"the POM's <{path}> is empty"
    text = {path: pom.findtext("m:" + "/m:".join(path.split("/")), None, POM) for path in CENTRAL}
    assert text["version"] == version
    home = versions.addresses()["home"]
    assert (text["url"], text["scm/url"]) == (home, home)
    assert text["scm/connection"] == text["scm/developerConnection"] == f"scm:git:{home}.git"
    stem = f"{text['artifactId']}-{version}"
    for classifier in ("", "-sources", "-javadoc"):
        assert (release_folder / f"{stem}{classifier}.jar").is_file()


def _chart_yaml(release_folder: Path) -> dict[str, Any]:
    chart = release_folder / f"spark-offset-sidecar-{build_info(release_folder)['chart']}.tgz"
    with tarfile.open(chart) as archive:
        member = archive.extractfile("spark-offset-sidecar/Chart.yaml")
        assert member is not None
        described: dict[str, Any] = yaml.safe_load(member)
    return described


def test_the_chart_has_what_artifact_hub_reads(release_folder: Path) -> None:
    """The packaged chart's annotations (licence, links, the image at the folder's version:
    the one it renders, ``test_the_chart_archive_renders_the_image_of_its_version``), its
    home, sources and maintainers; and ``helm lint --strict`` passes the archive."""
    info = build_info(release_folder)
    described = _chart_yaml(release_folder)
    addresses = versions.addresses()
    annotations = described["annotations"]
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    links = yaml.safe_load(annotations["artifacthub.io/links"])
    assert links == [
        {"name": "source", "url": addresses["home"]},
        {"name": "documentation", "url": addresses["manual"]},
    ]
    images = yaml.safe_load(annotations["artifacthub.io/images"])
    assert images == [
        {"name": "spark-offset-sidecar", "image": f"spark-offset-sidecar:{info['version']}"}
    ]
    assert described["home"] == addresses["home"]
    assert described["sources"] == [addresses["home"]]
    assert all(m["name"] and m["url"] == addresses["home"] for m in described["maintainers"])
    archive = release_folder / f"spark-offset-sidecar-{info['chart']}.tgz"
    lint = subprocess.run([helm(), "lint", "--strict", archive], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


SIGN = "tests/e2e/test_dist.py::test_a_maintainer_signs_the_jvm_listener_as_the_page_says"


def test_a_maintainer_signs_the_jvm_listener_as_the_page_says(
    release_folder: Path, tmp_path: Path
) -> None:
    """docs/versions.md's signing block, run in a copy of the JVM listener's files with a
    key of the test's own (no passphrase, in a GnuPG home of its own): each of the four
    files gets a signature that verifies, and a changed file's does not."""
    info = build_info(release_folder)
    jar = f"spark-offset-sidecar-listener-{info['version']}"
    signed = [f"{jar}.jar", f"{jar}-sources.jar", f"{jar}-javadoc.jar", f"{jar}.pom"]
    folder = tmp_path / "received"
    folder.mkdir()
    for name in signed:
        shutil.copy(release_folder / name, folder)
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}

    def gpg(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["gpg", *args], cwd=folder, env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    (block,) = [b for b in shell_blocks(DOCS / "versions.md") if SIGN in b.above]
    script = "set -euo pipefail\n" + "\n".join(block.commands)
    script = re.sub(r"^VERSION=\S+", f"VERSION={info['version']}", script, flags=re.M)
    try:
        made = gpg("--batch", "--passphrase", "", "--quick-generate-key",
                   "Maintainer <m@example.org>", "ed25519", "sign", "never")  # fmt: skip
        assert made.returncode == 0, made.stderr
        done = subprocess.run(
            ["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert 'Good signature from "Maintainer <m@example.org>"' in done.stderr
        assert sorted(p.name for p in folder.glob("*.asc")) == sorted(f"{s}.asc" for s in signed)
        for name in signed:
            assert gpg("--verify", f"{name}.asc", name).returncode == 0, name
        with (folder / f"{jar}.pom").open("a") as changed:
            changed.write(" ")
        assert gpg("--verify", f"{jar}.pom.asc", f"{jar}.pom").returncode != 0
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, check=False)


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
    published_release: Path, tmp_path: Path
) -> None:
    """Every shell block of the manual that names this test (the air-gapped steps), run
    exactly as written as a user with no clone runs it: in a folder holding only the
    release's files, with a Python of their own (``pip``, ``python``); ``/opt/sidecar`` a
    folder of the test's. The pages' ``VERSION=`` is the newest release's, whose folder
    this is (``published_release``)."""
    info = build_info(published_release)
    folder = tmp_path / "received"
    folder.mkdir()
    for artifact in published_release.iterdir():
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


def test_the_newest_release_rebuilds_from_its_recorded_commit(published_release: Path) -> None:
    """``make dist RELEASE=1`` in a fresh clone of the commit releases.toml records (or this
    tree, when it is the release) makes the release the pages name, every file made of
    the commit alone byte for byte as recorded at the cut (the fixture holds it to that);
    the files resolved from registries at build time are shown, not held."""
    info = build_info(published_release)
    newest = versions.released_versions()
    assert (info["version"], info["chart"], info["release"]) == (
        newest["version"],
        newest["chart"],
        True,
    )
    recorded = next(e for e in versions.releases() if e["version"] == info["version"])
    if recorded.get("commit"):
        assert info["commit"] == recorded["commit"]
    print(f"{info['version']}: resolved at build time, moved since the cut:",
          versions.compared(ROOT, published_release) or "nothing")  # fmt: skip
