"""The chart's pod on a real node: kube-apiserver, kube-controller-manager, kube-scheduler
and a kubelet over containerd, runc and a CNI bridge (harness/kube_api.py,
harness/kube_node.py), the release's image imported into containerd from its OCI archive
(nothing pulled). Installed as the manual installs it, in a namespace that enforces
PodSecurity ``restricted``: the kubelet runs the migrate init container, then the server,
gives it the variables a cluster gives (the Service's, the kubernetes Service's) and
answers its probes through the pod network until the pod is Ready."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.kube_api import KubeApi
from harness.kube_node import KubeNode
from tests.support.helm import CHART
from tests.support.kubernetes import restricted_namespace, run_helm
from tests.support.release import build_info, one
from tests.support.service import wait_for

# the release's image (release_folder: make dist), a kubelet (make tools), root
pytestmark = [pytest.mark.container, pytest.mark.tools]

RELEASE = "spark-offset-sidecar"  # the manual's names
NAMESPACE = "platform"
UID = 10001  # the chart's runAsUser


@pytest.fixture
def node(release_folder: Path) -> Iterator[KubeNode]:
    if os.geteuid() != 0:
        pytest.fail("the kubelet and containerd run as root")
    api = KubeApi().start()
    node = KubeNode(api)
    try:
        node.start()
        node.import_image(one(release_folder, "spark-offset-sidecar-image-*.oci.tar"))
        yield node
    finally:
        node.stop()


def test_the_charts_pod_runs_on_a_kubelet(node: KubeNode, release_folder: Path) -> None:
    kube = node.api
    version = build_info(release_folder)["version"]
    restricted_namespace(kube, NAMESPACE)
    # The SQLite claim's volume, as a cluster's storage would provide it: a folder of the
    # node, owned by the pod's user (the kubelet applies no fsGroup to a hostPath).
    data = node.root / "volumes" / "data"
    data.mkdir(parents=True)
    os.chown(data, UID, UID)
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "data"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "hostPath": {"path": str(data), "type": "Directory"},
        },
    }
    kube.kubectl("apply", "-f", "-", input=json.dumps(volume))
    installed = run_helm(
        kube, "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
        "--set", "image.repository=localhost/spark-offset-sidecar",
        "--set", f"image.tag={version}",
    )  # fmt: skip
    assert not installed.stderr, f"helm warned: {installed.stderr}"

    def ready() -> dict[str, Any] | None:
        pods = kube.get("-n", NAMESPACE, "pods")["items"]
        for pod in pods:
            for condition in pod.get("status", {}).get("conditions", []):
                if condition["type"] == "Ready" and condition["status"] == "True":
                    return dict(pod)
        return None

    try:
        pod = wait_for(ready, timeout=180, what="the chart's pod Ready")
    except AssertionError:
        events = kube.kubectl("-n", NAMESPACE, "get", "events").stdout
        kubelet = kube.log("kubelet")[-3000:]
        raise AssertionError(f"the pod is not Ready:\n{events}\n{kubelet}") from None
    (init,) = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0  # migrated
    pid = node.process("sidecar")
    environ = dict(
        entry.split("=", 1)
        for entry in Path(f"/proc/{pid}/environ").read_text().split("\0")
        if "=" in entry
    )
    status = Path(f"/proc/{pid}/status").read_text()
    uid = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert uid == [str(UID)] * 4, uid
    assert environ["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"  # given whatever the pod asks
    links = sorted(name for name in environ if name.startswith("SPARK_OFFSET_SIDECAR_"))
    print(
        f"pod {pod['metadata']['name']} Ready on {pod['spec']['nodeName']} at "
        f"{pod['status']['podIP']}, uid {UID}; the kubelet's variables: KUBERNETES_*, "
        f"and of the Service: {', '.join(links) or 'none (service links off)'}"
    )
