"""What Kubernetes itself gives a pod, written down from its source
(tests/fixtures/kubernetes), and helpers of the tests on a real Kubernetes API server
(``harness.kube_api``)."""

from __future__ import annotations

import os
import subprocess

from harness.kube_api import KubeApi
from harness.machine import ROOT
from tests.support.helm import helm

FIXTURES = ROOT / "tests" / "fixtures" / "kubernetes"


def service_link_variables() -> dict[str, str]:
    """The service-link variables a kubelet sets for the Services of service-links.env."""
    lines = (FIXTURES / "service-links.env").read_text().splitlines()
    pairs = (line.partition("=") for line in lines if line and not line.startswith("#"))
    return {name: value for name, _, value in pairs}


def restricted_namespace(kube: KubeApi, name: str) -> None:
    """A namespace that enforces, warns of and audits PodSecurity ``restricted``."""
    kube.kubectl("create", "namespace", name)
    kube.kubectl(
        "label", "namespace", name,
        *(f"pod-security.kubernetes.io/{mode}=restricted" for mode in ("enforce", "warn", "audit")),
    )  # fmt: skip


def run_helm(kube: KubeApi, *args: str) -> subprocess.CompletedProcess[str]:
    """helm with the cluster's kubeconfig; it must succeed."""
    done = subprocess.run(
        [helm(), *args],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)},
    )  # fmt: skip
    assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
    return done
