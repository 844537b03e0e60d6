"""The release as users take it: published to registry servers this session starts
(``tests/conftest.py``: ``package_index``, ``maven_repository``, ``oci_registry``; published
with twine, Maven, podman and helm by ``tests/support/registries.py``), then installed by
version as the manual's install pages say: every shell block that names this test, run
exactly as written, by a user with a Python of their own and the variables the pages ask
the reader to set (docs/versions.md, "Where a release is published"), naming these
servers. The service installed that way starts as getting started starts it, on every
address with the tokens file the page wrote: ready, a read without the token refused, with
it answered. The registry's chart, rendered by version with the image set, runs its pod
(``harness/pod.py``) on the image pulled by tag: ready.

The Spark proofs take their artifacts from the same registries: the listener from the
index under a real PySpark job (``test_listener_wheel.py``); the JVM listener by
``--packages`` in a classic job and a Connect server (``test_jvm_listener.py``). The
release published is the newest (``published_release``), the version the pages name; the
tree's own image and chart run on a real kubelet in ``test_kubernetes_node.py`` (and as
replicas on PostgreSQL in ``test_container.py``)."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import httpx
import pytest
import yaml

from harness.machine import ROOT, free_port, stop_process
from harness.pod import Pod, podman
from harness.registries import MavenRepository, OciRegistry, PackageIndex
from tests.support.helm import KUBERNETES, helm
from tests.support.manual import shell_blocks
from tests.support.registries import CHARTS, IMAGE, reader_env
from tests.support.release import build_info
from tests.support.service import wait_for
from tests.unit.test_docs import PAGES

# on the container tests' worker: one push of the image per run
pytestmark = [pytest.mark.container, pytest.mark.xdist_group("container")]

THIS = "tests/e2e/test_registries.py::test_the_install_pages_install_by_version_from_registries"


def pod_runs(
    registry: OciRegistry, image: str, chart: str, env: dict[str, str], folder: Path
) -> None:
    """The registry's chart rendered by version with the image set, its pod run on the
    image the page pulled, until its probes answer."""
    rendered = subprocess.run(
        [helm(), "template", "sidecar", f"oci://{registry.host}/{CHARTS}/spark-offset-sidecar",
         "--version", chart, "--kube-version", KUBERNETES,
         "--set", f"image.repository={registry.host}/{IMAGE}",
         "--set", f"image.tag={image.rsplit(':', 1)[1]}",
         "--set", "kafka.bootstrapServers=127.0.0.1:1"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    documents = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    pod = Pod(documents, image, folder)
    assert pod.spec["containers"][0]["image"] == image
    pod.start()
    try:
        assert pod.probe("/readyz") == 200
    finally:
        pod.remove()


def test_the_install_pages_install_by_version_from_registries(
    published_release: Path,
    package_index: PackageIndex,
    maven_repository: MavenRepository,
    oci_registry: OciRegistry,
    tmp_path: Path,
) -> None:
    info = build_info(published_release)
    version, chart = info["version"], info["chart"]
    home = tmp_path / "home"
    home.mkdir()
    user = tmp_path / "python"
    venv.create(user, with_pip=True)
    env = reader_env(tmp_path, index=package_index, maven=maven_repository, oci=oci_registry)
    env["PATH"] = f"{user / 'bin'}:{ROOT / '.local' / 'bin'}:/usr/bin:/bin"  # helm
    sidecar = tmp_path / "opt-sidecar"
    printed, blocks = "", 0
    image = f"{oci_registry.host}/{IMAGE}:{version}"
    try:
        # getting started's steps last: they take up the service the service page installed
        for page, block in sorted(
            ((each, block) for each in PAGES for block in shell_blocks(each)
             if block.above == f"<!-- run by {THIS} -->"),  # a note in brackets: run below
            key=lambda found: found[0].name == "getting-started.md",
        ):  # fmt: skip
            # a command continued over a backslash is one line again
            commands = [command.replace("\n", " ") for command in block.commands]
            script = "set -euo pipefail\n" + "\n".join(commands)
            script = script.replace("/opt/sidecar", str(sidecar))
            done = subprocess.run(
                ["bash", "-c", script], cwd=home, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, f"{page.name}:{block.line}\n{done.stdout}{done.stderr}"
            printed += done.stdout
            blocks += 1
        pod_runs(oci_registry, image, chart, env, tmp_path / "pod")
    finally:
        podman("rmi", "--force", image, check=False)
    assert blocks >= 4, "the install pages name this test"
    assert f"offset-sidecar {version}\n" in printed  # run/service.md
    assert f"\n{version}\n" in f"\n{printed}"  # the Python listener's page
    assert f"image: {image}\n" in printed or f'image: "{image}"\n' in printed  # kubernetes.md
    assert (home / "spark-offset-sidecar" / "ci" / "production-values.yaml").exists()
    assert f"version: {chart}\n" in (home / "spark-offset-sidecar" / "Chart.yaml").read_text()

    # getting started's service: on every address, with the tokens file its page wrote
    token = json.loads((sidecar / "tokens.json").read_text())["tokens"][0]["token"]
    assert f"{token}\n" in printed
    port = free_port()
    server = subprocess.Popen(
        [str(sidecar / "bin" / "offset-sidecar"), "serve"],
        env={"PATH": "/usr/bin:/bin", "SIDECAR_PORT": str(port), "SIDECAR_HOST": "0.0.0.0",
             "SIDECAR_TOKENS_FILE": str(sidecar / "tokens.json"),
             "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": "broker.invalid:9092"},
        cwd=home, stdout=(tmp_path / "serve.log").open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:

        def ready() -> bool:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(ready, timeout=60, what="the service from the index ready")
        status = f"http://127.0.0.1:{port}/v1/status"
        assert httpx.get(status, timeout=10).status_code == 401
        bearer = {"Authorization": f"Bearer {token}"}
        assert httpx.get(status, headers=bearer, timeout=10).status_code == 200
    finally:
        stop_process(server)
    assert (home / "sidecar.db").exists()
