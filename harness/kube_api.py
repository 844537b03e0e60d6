"""A real Kubernetes control plane without a node, for the chart's tests: kine (etcd's API
over SQLite) in a temporary folder, kube-apiserver (self-signed serving certificate, a
service-account key pair made here, one static admin token, RBAC, PodSecurity admission)
and kube-controller-manager (a Deployment's ReplicaSet and Pods are created: Pending, no
node, but admitted). All built from the Go module proxy by ``make tools``
(scripts/build-kubernetes.sh), all on free loopback ports."""

from __future__ import annotations

import json
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from harness.machine import ROOT, answers, free_port, refuse_in_inner_loop, stop_process

BIN = ROOT / ".local" / "bin"
ISSUER = "https://kubernetes.default.svc.cluster.local"


def binary(name: str) -> Path:
    """``.local/bin/<name>``, linked by ``make tools`` into the shared cache."""
    found = BIN / name
    if not found.exists():
        raise RuntimeError(f"{name} is missing: run `make tools`")
    return found


class KubeApi:
    """The control plane; ``kubeconfig`` names the cluster-admin user (group
    system:masters) by a static token."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="sidecar-kube-"))
        self.kubeconfig = self.root / "kubeconfig"
        self.token = secrets.token_hex(24)
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self._processes: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []

    def start(self, timeout: float = 180.0) -> KubeApi:
        """Start kine, the API server and the controller-manager; return once the API
        server's /readyz answers ok and the controller-manager has made the ``default``
        namespace's service account (its controllers run)."""
        refuse_in_inner_loop("starts a Kubernetes API server (built by `make tools`)")
        deadline = time.monotonic() + timeout
        kine_port = free_port()
        self._spawn(
            "kine",
            binary("kine"),
            "--endpoint", f"sqlite://{self.root / 'state.db'}",
            "--listen-address", f"127.0.0.1:{kine_port}",
            "--metrics-bind-address", "0",  # none
        )  # fmt: skip
        self.until(lambda: answers(kine_port), deadline, "kine's etcd port")
        private, public = self._service_account_keys()
        tokens = self.root / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin,"system:masters"\n')
        certs = self.root / "certs"
        self._spawn(
            "kube-apiserver",
            binary("kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{kine_port}",
            "--storage-media-type", "application/json",  # kine stores what it is given
            "--bind-address", "127.0.0.1",
            "--secure-port", str(self.port),
            "--cert-dir", str(certs),
            "--service-cluster-ip-range", "10.96.0.0/16",
            "--service-account-key-file", str(public),
            "--service-account-signing-key-file", str(private),
            "--service-account-issuer", ISSUER,
            "--token-auth-file", str(tokens),
            "--authorization-mode", "RBAC",
            "--enable-admission-plugins", "PodSecurity",
            "--profiling=false",
        )  # fmt: skip
        ca = certs / "apiserver.crt"  # the self-signed certificate and its own CA
        self.until(ca.exists, deadline, "the API server's certificate")
        self._write_kubeconfig(ca)
        self.until(self._ready, deadline, "the API server's /readyz")
        self._spawn(
            "kube-controller-manager",
            binary("kube-controller-manager"),
            "--kubeconfig", str(self.kubeconfig),
            "--bind-address", "127.0.0.1",
            "--secure-port", str(free_port()),
            "--cert-dir", str(self.root / "controller-manager-certs"),
            "--service-account-private-key-file", str(private),
            "--root-ca-file", str(ca),
            "--leader-elect=false",
            "--profiling=false",
        )  # fmt: skip
        self.until(
            lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
            deadline,
            "the controller-manager's first service account",
        )
        return self

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``kubectl`` as the cluster's admin; stdout and stderr captured."""
        done = subprocess.run(
            [str(binary("kubectl")), "--kubeconfig", str(self.kubeconfig), *args],
            input=input, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr}")
        return done

    def get(self, *args: str) -> dict[str, Any]:
        """An object (or list) as JSON, ``kubectl get ARGS -o json``."""
        found: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json").stdout)
        return found

    def stop(self) -> None:
        """Stop every process and remove the folder."""
        self.stop_processes()
        shutil.rmtree(self.root, ignore_errors=True)

    def stop_processes(self) -> None:
        """Stop every process, the last started first (a node's before the server's)."""
        for process, log in reversed(self._processes):
            stop_process(process)
            log.close()
        self._processes.clear()

    def log(self, name: str) -> str:
        """A process's output so far (for failure messages)."""
        return (self.root / f"{name}.log").read_text(errors="replace")

    def _spawn(self, name: str, program: Path, *args: str) -> None:
        log = (self.root / f"{name}.log").open("wb")
        process = subprocess.Popen([str(program), *args], stdout=log, stderr=subprocess.STDOUT)
        self._processes.append((process, log))

    def until(self, condition: object, deadline: float, what: str) -> None:
        """Until ``condition()`` holds; fails naming a process of the cluster that exited
        (with its log's end), or ``what`` at ``deadline``."""
        assert callable(condition)
        while not condition():
            for process, log in self._processes:
                if process.poll() is not None:
                    name = Path(log.name).stem
                    raise RuntimeError(
                        f"{name} exited ({process.returncode}) while waiting for {what}:\n"
                        + self.log(name)[-3000:]
                    )
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.1)

    def _ready(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.root / "certs" / "apiserver.crt"))
        request = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as answer:
                return bool(answer.status == 200 and answer.read() == b"ok")
        except (urllib.error.URLError, OSError):
            return False

    def _service_account_keys(self) -> tuple[Path, Path]:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private, public = self.root / "sa.key", self.root / "sa.pub"
        private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return private, public

    def _write_kubeconfig(self, ca: Path) -> None:
        # JSON is YAML: kubectl, helm and the controller-manager read it alike.
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "local",
                            "cluster": {"server": self.server, "certificate-authority": str(ca)},
                        }
                    ],
                    "users": [{"name": "admin", "user": {"token": self.token}}],
                    "contexts": [
                        {
                            "name": "local",
                            "context": {
                                "cluster": "local",
                                "user": "admin",
                                "namespace": "default",
                            },
                        }
                    ],
                    "current-context": "local",
                }
            )
        )
        self.kubeconfig.chmod(0o600)
