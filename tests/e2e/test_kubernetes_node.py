"""The chart's pod on a real node: kube-apiserver, kube-controller-manager, kube-scheduler
and a kubelet over containerd, runc and a CNI bridge (harness/kube_api.py,
harness/kube_node.py), the release's image imported into containerd from its OCI archive
(nothing pulled). Installed as the manual installs it, in a namespace that enforces
PodSecurity ``restricted``: the kubelet runs the migrate init container, then the server,
gives it the variables a cluster gives (the Service's, the kubernetes Service's) and
answers its probes through the pod network until the pod is Ready. On that pod, the
upgrade page's SQLite backup and restore, as written (kubectl exec through the API server
and the kubelet, a restore pod, helm upgrade and rollback)."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kube_api import KubeApi
from harness.kube_node import KubeNode
from harness.machine import ROOT
from tests.support.backups import Checkpoints, page_blocks, queries_in, run_script
from tests.support.helm import CHART
from tests.support.kubernetes import restricted_namespace, run_helm
from tests.support.release import build_info, one
from tests.support.service import wait_for

# the release's image (release_folder: make dist), a kubelet (make tools), root; one node
# for the module's tests (on one worker), each leaving the chart's pod Ready
pytestmark = [pytest.mark.container, pytest.mark.tools, pytest.mark.xdist_group("kube-node")]

RELEASE = "spark-offset-sidecar"  # the manual's names
NAMESPACE = "platform"
UID = 10001  # the chart's runAsUser
THIS = "tests/e2e/test_kubernetes_node.py"


@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
def chart(node: KubeNode, release_folder: Path) -> str:
    """The chart installed as the manual installs it, its default values (SQLite on a
    claim), in a ``restricted`` namespace; its version."""
    kube = node.api
    version: str = build_info(release_folder)["version"]
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
    return version


def ready_pod(kube: KubeApi) -> dict[str, Any]:
    """The chart's pod, once Ready (the kubelet's and the namespace's events if not)."""

    def ready() -> dict[str, Any] | None:
        pods = kube.get("-n", NAMESPACE, "pods", "-l", f"app.kubernetes.io/instance={RELEASE}")
        for pod in pods["items"]:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            for condition in pod.get("status", {}).get("conditions", []):
                if condition["type"] == "Ready" and condition["status"] == "True":
                    return dict(pod)
        return None

    try:
        found: dict[str, Any] = wait_for(ready, timeout=180, what="the chart's pod Ready")
    except AssertionError:
        events = kube.kubectl("-n", NAMESPACE, "get", "events").stdout
        kubelet = kube.log("kubelet")[-3000:]
        raise AssertionError(f"the pod is not Ready:\n{events}\n{kubelet}") from None
    return found


def test_the_charts_pod_runs_on_a_kubelet(node: KubeNode, chart: str) -> None:
    pod = ready_pod(node.api)
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


def test_the_charts_sqlite_is_backed_up_and_restored_as_the_upgrade_page_says(
    node: KubeNode, chart: str, tmp_path: Path
) -> None:
    """docs/run/upgrade.md's steps for the chart's SQLite, as written, with kubectl and helm:
    a backup taken in the pod while the service stores checkpoints, copied off the cluster,
    holds every checkpoint answered before it (a consistent SQLite file); after an upgrade
    (here the same chart with a changed pod), the pod scaled to 0, the copy put back through
    a ``restricted`` restore pod and the release rolled back, the service holds what the
    backup holds and nothing it took in after."""
    kube = node.api
    test = f"{THIS}::test_the_charts_sqlite_is_backed_up_and_restored_as_the_upgrade_page_says"
    backup, older, *restore = page_blocks(test)
    env = {
        "PATH": f"{ROOT / '.local' / 'bin'}:/usr/bin:/bin",  # kubectl, helm; sqlite3
        "HOME": str(tmp_path),
        "KUBECONFIG": str(kube.kubeconfig),
        "OCI_REGISTRY": "localhost",  # the image imported: localhost/spark-offset-sidecar
        "VERSION": chart,
    }
    secret = kube.get("-n", NAMESPACE, "secret", f"{RELEASE}-tokens")
    tokens = json.loads(base64.b64decode(secret["data"]["tokens.json"]))
    token = tokens["tokens"][0]["token"]

    def service() -> str:
        return f"http://{ready_pod(kube)['status']['podIP']}:8000"

    started = time.monotonic()
    copy = tmp_path / "sidecar-before-upgrade.db"
    with Checkpoints(service(), token) as writer:
        wait_for(lambda: len(writer.answered) >= 20, what="20 checkpoints stored")
        # the way of a pod of 0.2.0 (no backup command): its one command, then the others
        earlier = set(writer.answered)
        run_script([*older, *backup[1:]], tmp_path, env)
        copy.rename(tmp_path / "with-python.db")
        before = set(writer.answered)
        printed = run_script(backup, tmp_path, env)
        wait_for(lambda: len(writer.answered) >= len(before) + 20, what="20 more")
    backed_up = time.monotonic()
    assert earlier <= queries_in(tmp_path / "with-python.db") <= before
    assert printed.splitlines()[-1] == "ok", printed  # PRAGMA integrity_check
    held = queries_in(copy)
    assert before <= held <= set(writer.answered), "a checkpoint answered is not in the copy"
    after = set(writer.answered) - held
    assert after, "nothing stored after the backup"

    # The upgrade the restore undoes: a new revision, its pod Recreated on the database.
    run_helm(
        kube, "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
        "--set", "podAnnotations.upgraded=yes",
    )  # fmt: skip
    upgraded = ready_pod(kube)
    assert upgraded["metadata"]["annotations"].get("upgraded") == "yes"
    upgraded_at = time.monotonic()
    for script in restore:
        run_script(script, tmp_path, env)
    restored = time.monotonic()

    pod = ready_pod(kube)
    assert "upgraded" not in pod["metadata"].get("annotations", {})  # rolled back
    answer = httpx.get(
        f"http://{pod['status']['podIP']}:8000/v1/queries",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    assert {q["query_id"] for q in answer.json()} == held
    assert kube.kubectl("-n", NAMESPACE, "get", "pod", "sidecar-restore", check=False).returncode
    print(
        f"the copy held {len(held)} queries, {len(after)} stored after it gone once "
        f"restored; backup {backed_up - started:.0f} s, upgrade {upgraded_at - backed_up:.0f} s, "
        f"restore and rollback {restored - upgraded_at:.0f} s"
    )
