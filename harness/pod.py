"""The project's container image and the chart's pod, run the way Kubernetes would run
them, with podman (Debian's package; no registry needed).

``build_image`` builds the project's own Dockerfile on two base images of Debian packages
(mmdebstrap: Python 3.11 of Debian 12): the runtime's, with Debian's CA certificates
alone (``--build-arg BASE=...``), and the build stage's, that one with the machine's own
CA certificates added and ``PIP_CERT`` pointing at them (``BUILD_BASE``), for pip to reach
the package index through this machine's network; the released image holds none of them
(docs/decisions.md, "The image's build trusts the machine, the image does not").
``--format docker`` keeps HEALTHCHECK, which the OCI format drops. Users build the same
Dockerfile on ``python:3.11-slim``. ``build_base`` also makes, for a Python that this
machine lacks, a base of the Debian suite that packages it
(``tests/e2e/test_python_versions.py``).

``Pod`` takes the documents ``helm template`` renders and runs one replica of the
Deployment as the kubelet would: the init containers first, each to its end; the
ConfigMap as environment (``envFrom``), ``secretKeyRef`` values, Secret volumes as files
(``items`` honoured), ``emptyDir`` and the PersistentVolumeClaim as host folders owned by
the pod's ``fsGroup``; the containers' and the pod's securityContext (user and group,
read-only root, capabilities dropped, no new privileges). The one difference: host
networking, so the pod's port is a free one (``SIDECAR_PORT`` overridden) and the broker
and PostgreSQL on 127.0.0.1 are the pod's too.

podman here: ``runc`` (crun refuses this machine's hybrid cgroups) and ``default_ulimits
= []`` (the runtime may not raise limits), in a ``containers.conf`` of the harness's own
(``CONTAINERS_CONF``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from harness.machine import ROOT, free_port, machine_lock, refuse_in_inner_loop

CONF = ROOT / ".local" / "podman" / "containers.conf"
BASE_TAG = "localhost/spark-offset-sidecar-base"
IMAGE_TAG = "localhost/spark-offset-sidecar:test"


def podman(
    *args: str, check: bool = True, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    CONF.parent.mkdir(parents=True, exist_ok=True)
    CONF.write_text('[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n')
    return subprocess.run(
        ["podman", *args],
        env={**os.environ, "CONTAINERS_CONF": str(CONF)},
        capture_output=True,
        text=True,
        check=check,
        timeout=timeout,
    )


def _certificates() -> list[Path]:
    """The machine's own CA certificates (Debian's ``update-ca-certificates`` adds them)."""
    return sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))


# What the project's image is built on: Debian 12's Python 3.11.
IMAGE_SUITE = "bookworm"
IMAGE_PACKAGES = ("python3", "python3-venv", "python-is-python3")

# The bases' settings; one that builds or installs also has pip and uv trust the CA
# certificates it was given (_TRUSTING).
_SETTINGS = ('CMD ["/bin/bash"]',)
_TRUSTING = (
    "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
    "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
)


def _hash(*made_of: str) -> str:
    return hashlib.sha256("\n".join(made_of).encode()).hexdigest()[:12]


def build_base(
    suite: str = IMAGE_SUITE,
    packages: tuple[str, ...] = IMAGE_PACKAGES,
    *,
    machine_ca: bool = True,
) -> str:
    """A Debian base image of ``suite`` with ``packages`` and Debian's ``ca-certificates``;
    with ``machine_ca``, the machine's own CA certificates added on top (a base that builds
    or installs, for pip to reach the package index), without, Debian's alone (the
    released image's). Each is made once per content: its tag carries a hash of what it
    is made of (the suite and packages; the Debian base's image and the certificates)."""
    included = ",".join([*packages, "ca-certificates"])
    debian = f"{BASE_TAG}:{_hash(suite, included, *_SETTINGS)}"
    with machine_lock("podman-base"):
        if _image_id(debian) is None:
            _make_base(suite, included, debian)
        certificates = _certificates()
        if not machine_ca or not certificates:
            return debian
        made_of = [str(_image_id(debian)), *_TRUSTING, *(c.read_text() for c in certificates)]
        trusting = f"{BASE_TAG}:{_hash(*made_of)}"
        if _image_id(trusting) is None:
            _add_certificates(debian, certificates, trusting)
    return trusting


def _make_base(suite: str, included: str, tag: str) -> None:
    with tempfile.TemporaryDirectory() as work:
        tar = Path(work) / "base.tar"
        subprocess.run(
            ["mmdebstrap", "--variant=minbase", f"--include={included}",
             # A suite's Release file expires (unstable's within days) while a mirror
             # that serves a snapshot of it keeps it: apt then refuses the whole suite.
             "--aptopt=Acquire::Check-Valid-Until \"false\"",
             "--format=tar", suite, str(tar)],
            check=True, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        podman("import", *(f"--change={c}" for c in _SETTINGS), str(tar), tag)


def _add_certificates(base: str, certificates: list[Path], tag: str) -> None:
    """``base`` with ``certificates`` in its bundle (``update-ca-certificates``), and pip
    and OpenSSL pointed at it."""
    with tempfile.TemporaryDirectory() as work:
        for certificate in certificates:
            shutil.copy(certificate, work)
        steps = [
            f"FROM {base}",
            "COPY *.crt /usr/local/share/ca-certificates/",
            "RUN update-ca-certificates",
            *_TRUSTING,
        ]
        (Path(work) / "Containerfile").write_text("\n".join(steps) + "\n")
        podman("build", "--layers=false", "--network", "none", "-t", tag, work)


def build_image(
    context: Path = ROOT, tag: str = IMAGE_TAG, build_args: dict[str, str] | None = None
) -> tuple[str, int]:
    """The project's Dockerfile in ``context`` built on the Debian bases (the build stage
    on the one that trusts the machine's CA certificates): (tag, size in bytes). Each
    build leaves nothing behind but the image: no stage or layer images
    (``--layers=false``), and the tag's previous image removed (each run left 0.8 GB,
    5.5 GB in all here). ``make dist`` builds its image so (``scripts/dist.py``), with
    ``SOURCE_DATE_EPOCH`` among ``build_args``: every layer's files, and the image, dated
    then (``--timestamp``), so that the same inputs build the same image."""
    refuse_in_inner_loop("builds the container image")
    bases = {"BASE": build_base(machine_ca=False), "BUILD_BASE": build_base()}
    arguments = {**bases, **(build_args or {})}
    epoch = arguments.get("SOURCE_DATE_EPOCH")
    previous = _image_id(tag)
    podman(
        "build", "--format", "docker", "--layers=false", "--network", "host",
        *([f"--timestamp={epoch}"] if epoch else []),
        *(f"--build-arg={k}={v}" for k, v in arguments.items()), "-t", tag, str(context),
    )  # fmt: skip
    if previous and previous != _image_id(tag):
        podman("rmi", previous, check=False)  # still used by a container: kept
    size = podman("image", "inspect", tag, "--format", "{{.Size}}").stdout.strip()
    return tag, int(size)


def _image_id(tag: str) -> str | None:
    found = podman("image", "inspect", tag, "--format", "{{.Id}}", check=False)
    return found.stdout.strip() if found.returncode == 0 else None


class Pod:
    """One replica of the chart's Deployment, run by podman as the kubelet would."""

    def __init__(
        self,
        documents: list[dict[str, Any]],
        image: str,
        folder: Path,
        *,
        secrets: dict[str, dict[str, str]] | None = None,
        name: str = "sidecar",
    ) -> None:
        self.docs = documents
        self.image = image
        self.folder = folder
        self.extra_secrets = secrets or {}
        self.name = f"{name}-{os.getpid()}-{free_port()}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        deployment = self._one("Deployment")
        self.spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
        self.volumes = self._volumes()

    # --- what the chart rendered ---------------------------------------------------

    def _one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        for doc in self.docs:
            if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name):
                return doc
        raise KeyError(f"the chart rendered no {kind} {name or ''}")

    def _secret(self, name: str) -> dict[str, str]:
        if name in self.extra_secrets:
            return self.extra_secrets[name]
        doc = self._one("Secret", name)
        data = {k: base64.b64decode(v).decode() for k, v in (doc.get("data") or {}).items()}
        data.update(doc.get("stringData") or {})
        return data

    def _volumes(self) -> dict[str, Path]:
        """Each volume of the pod as a host folder (made once; a restart keeps them)."""
        group = self.spec.get("securityContext", {}).get("fsGroup")
        made: dict[str, Path] = {}
        for volume in self.spec.get("volumes", []):
            path = self.folder / "volumes" / volume["name"]
            path.mkdir(parents=True, exist_ok=True)
            if "secret" in volume:
                data = self._secret(volume["secret"]["secretName"])
                items = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    (path / item["path"]).write_text(data[item["key"]])
                    os.chmod(path / item["path"], 0o644)
            elif "emptyDir" in volume:
                os.chmod(path, 0o1777)
            elif "persistentVolumeClaim" in volume and group is not None:
                os.chown(path, 0, group)
                os.chmod(path, 0o2775)  # fsGroup: group-owned, setgid
            made[volume["name"]] = path
        return made

    def _environment(self, container: dict[str, Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                env.update(self._one("ConfigMap", source["configMapRef"]["name"])["data"])
            if "secretRef" in source:
                env.update(self._secret(source["secretRef"]["name"]))
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = str(item["value"])
            elif "secretKeyRef" in item.get("valueFrom", {}):
                ref = item["valueFrom"]["secretKeyRef"]
                env[item["name"]] = self._secret(ref["name"])[ref["key"]]
            elif "configMapKeyRef" in item.get("valueFrom", {}):
                ref = item["valueFrom"]["configMapKeyRef"]
                env[item["name"]] = self._one("ConfigMap", ref["name"])["data"][ref["key"]]
        env["SIDECAR_PORT"] = str(self.port)  # host networking: a free port of its own
        return env

    def _run_args(self, container: dict[str, Any]) -> list[str]:
        pod_security = self.spec.get("securityContext", {})
        security = {**pod_security, **container.get("securityContext", {})}
        args = ["--network", "host", "--pull", "never"]
        if "runAsUser" in security:
            args += ["--user", f"{security['runAsUser']}:{security.get('runAsGroup', 0)}"]
        if "fsGroup" in pod_security:
            args += ["--group-add", str(pod_security["fsGroup"])]
        if security.get("readOnlyRootFilesystem"):
            args += ["--read-only", "--read-only-tmpfs=false"]
        for capability in security.get("capabilities", {}).get("drop", []):
            args += ["--cap-drop", capability]
        if security.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        for key, value in self._environment(container).items():
            args += ["--env", f"{key}={value}"]
        for mount in container.get("volumeMounts", []):
            flag = ":ro" if mount.get("readOnly") else ""
            args += ["--volume", f"{self.volumes[mount['name']]}:{mount['mountPath']}{flag}"]
        return args

    # --- running ---------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> Pod:
        """Init containers to their end, then the container, until its startup probe
        answers 200. A start that fails leaves no container behind."""
        try:
            return self._start(timeout)
        except BaseException:
            self.stop(grace=1)
            raise

    def _start(self, timeout: float) -> Pod:
        for init in self.spec.get("initContainers", []):
            done = podman("run", "--rm", *self._run_args(init), self.image, *init.get("args", []),
                          check=False)  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(f"init container {init['name']} failed: {done.stderr[-2000:]}")
        container = self.spec["containers"][0]
        podman("rm", "-f", self.name, check=False)
        podman("run", "-d", "--name", self.name, *self._run_args(container), self.image,
               *container.get("args", []))  # fmt: skip
        probe = container.get("startupProbe") or container.get("readinessProbe")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.probe(probe["httpGet"]["path"]) == 200:
                return self
            if self.state() != "running":
                raise RuntimeError(f"the container stopped: {self.logs()[-3000:]}")
            time.sleep(0.5)
        raise RuntimeError(f"the startup probe did not pass: {self.logs()[-3000:]}")

    def probe(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=3) as answer:
                status: int = answer.status
                return status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    def state(self) -> str:
        done = podman("inspect", self.name, "--format", "{{.State.Status}}", check=False)
        return done.stdout.strip() or "gone"

    def logs(self) -> str:
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def stop(self, grace: int = 30) -> None:
        podman("stop", "-t", str(grace), self.name, check=False)
        podman("rm", "-f", self.name, check=False)

    def kill(self) -> None:
        podman("kill", "-s", "KILL", self.name, check=False)

    def remove(self) -> None:
        self.stop(grace=5)
        shutil.rmtree(self.folder / "volumes", ignore_errors=True)
