"""The chart's pod on a real node: kube-apiserver, kube-controller-manager, kube-scheduler
and a kubelet over containerd, runc and a CNI bridge (harness/kube_api.py,
harness/kube_node.py), the release's image imported into containerd from its OCI archive
(nothing pulled). Installed as the manual installs it, in a namespace that enforces
PodSecurity ``restricted``: the kubelet runs the migrate init container, then the server,
gives it the variables a cluster gives (the Service's, the kubernetes Service's) and
answers its probes through the pod network until the pod is Ready. That pod, from the
machine and through ``kubectl exec`` (the API server and the kubelet): its
securityContext (uid 10001, a read-only root, /tmp the emptyDir, no capability, no new
privileges), each probe the chart names answered 200, the Dockerfile's HEALTHCHECK command
passing in it. With tokens given as values and a real broker on the pod network (helm
upgrade): a post without a token refused and stored nowhere, the token's committed to
the broker, and the state kept when the pod is deleted (the Deployment's new pod on the
same claim). On that pod, the upgrade page's SQLite backup and restore, as written (a
restore pod, helm upgrade and rollback)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness import kafka_broker
from harness.kube_api import KubeApi
from harness.kube_node import GATEWAY, KubeNode
from harness.machine import ROOT, free_port
from tests.support.backups import Checkpoints, page_blocks, queries_in, run_script
from tests.support.helm import CHART
from tests.support.kafka import create_topics, run_sync, unique_group, wait_for_committed
from tests.support.kubernetes import restricted_namespace, run_helm
from tests.support.release import build_info, one
from tests.support.service import progress_event, wait_for
from tests.support.wheels import dockerfile_healthcheck

# the release's image (release_folder: make dist), a kubelet (make tools), root; one node
# for the module's tests (on one worker), each leaving the chart's pod Ready
pytestmark = [pytest.mark.container, pytest.mark.tools, pytest.mark.xdist_group("kube-node")]

RELEASE = "spark-offset-sidecar"  # the manual's names
NAMESPACE = "platform"
UID = 10001  # the chart's runAsUser
THIS = "tests/e2e/test_kubernetes_node.py"
# tokens given as a value (auth.tokens), where the manual's install has one generated
TOKEN = "team-a-secret-token-0123456789abcdef"
TOKENS = json.dumps({"tokens": [{"name": "team-a", "token": TOKEN, "write": ["*"], "read": ["*"]}]})


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
    """The chart's pod, Ready, once the Deployment's rollout has ended (as ``kubectl
    rollout status`` has it: a helm upgrade's old pod is not taken for its new one); the
    kubelet's and the namespace's events if not."""

    def ready() -> dict[str, Any] | None:
        deployment = kube.get("-n", NAMESPACE, "deployment", RELEASE)
        status = deployment.get("status", {})
        if status.get("observedGeneration", 0) < deployment["metadata"]["generation"]:
            return None
        counts = ("replicas", "updatedReplicas", "availableReplicas")
        if {status.get(count, 0) for count in counts} != {deployment["spec"]["replicas"]}:
            return None
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


def exec_in(kube: KubeApi, pod: dict[str, Any], *command: str) -> subprocess.CompletedProcess[str]:
    """``command`` run in the pod's server container (kubectl exec: the API server, the
    kubelet, containerd)."""
    name = pod["metadata"]["name"]
    return kube.kubectl("-n", NAMESPACE, "exec", name, "-c", "sidecar", "--", *command, check=False)


def test_the_charts_pod_runs_on_a_kubelet(node: KubeNode, chart: str) -> None:
    kube = node.api
    pod = ready_pod(kube)
    (init,) = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0  # migrated
    (server,) = pod["status"]["containerStatuses"]
    assert server["started"], server  # its startup probe passed
    assert server["ready"], server  # and its readiness probe
    pid = node.process("sidecar")
    environ = dict(
        entry.split("=", 1)
        for entry in Path(f"/proc/{pid}/environ").read_text().split("\0")
        if "=" in entry
    )
    assert environ["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"  # given whatever the pod asks
    links = sorted(name for name in environ if name.startswith("SPARK_OFFSET_SIDECAR_"))

    # the securityContext, read from the machine: its user, no capability left or to be
    # had, no new privileges; its root read-only, /tmp the emptyDir
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    status = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    assert status["Uid"].split() == [str(UID)] * 4, status["Uid"]
    assert status["CapEff"] == status["CapBnd"] == "0000000000000000", status
    assert status["NoNewPrivs"] == "1"
    mounts = {
        m.split()[4]: m.split() for m in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    }
    assert "ro" in mounts["/"][5].split(","), mounts["/"]
    assert mounts["/tmp"][3].endswith("kubernetes.io~empty-dir/tmp"), mounts["/tmp"]
    # and from inside, as the service's own user writes
    written = exec_in(kube, pod, "touch", "/opt/x")
    assert written.returncode != 0, "the root filesystem is read-only"
    assert "Read-only file system" in written.stderr, written.stderr
    assert exec_in(kube, pod, "touch", "/tmp/x").returncode == 0, "/tmp is the emptyDir"

    # each probe the chart names answers 200 at the pod's address
    (container,) = pod["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        url = f"http://{pod['status']['podIP']}:{ports[get['port']]}{get['path']}"
        assert httpx.get(url, timeout=10).status_code == 200, probe
    # the Dockerfile's HEALTHCHECK command, in the container (an OCI archive carries no
    # HEALTHCHECK: docker run users give it, docs/run/service.md; Kubernetes probes)
    healthcheck = dockerfile_healthcheck()
    assert "livez" in " ".join(healthcheck)
    checked = exec_in(kube, pod, *healthcheck)
    assert checked.returncode == 0, checked.stderr
    print(
        f"pod {pod['metadata']['name']} Ready on {pod['spec']['nodeName']} at "
        f"{pod['status']['podIP']}, uid {UID}; the kubelet's variables: KUBERNETES_*, "
        f"and of the Service: {', '.join(links) or 'none (service links off)'}"
    )


@pytest.fixture
def pods_broker(node: KubeNode, chart: str, tmp_path: Path) -> Iterator[kafka_broker.LocalBroker]:
    """A broker of the test's own that the pod reaches: a second listener on the pod
    network's gateway, this machine's address on the bridge (there once a pod started)."""
    ready_pod(node.api)
    local = kafka_broker.brand_new(tmp_path / "kafka", external=f"{GATEWAY}:{free_port()}")
    yield local
    local.stop()


@pytest.mark.kafka
def test_the_charts_pod_takes_tokens_commits_to_kafka_and_keeps_its_state_when_deleted(
    node: KubeNode, chart: str, pods_broker: kafka_broker.LocalBroker, tmp_path: Path
) -> None:
    """Tokens given as values (``auth.tokens``: the chart's Secret, a file in the pod) and
    the broker named (helm upgrade): a post without a token is refused and stores nothing,
    the token's are committed to the broker from the pod network; the pod deleted, the
    Deployment's new pod on the same claim holds the query and goes on committing. The
    query released and the release rolled back at the end, as the other tests find them."""
    kube = node.api
    bootstrap = pods_broker.bootstrap
    group = unique_group("pod")
    topic = f"t-{group}"
    run_sync(create_topics(bootstrap, [topic], 1))
    values = tmp_path / "values.json"
    values.write_text(
        json.dumps(
            {"kafka": {"bootstrapServers": pods_broker.external}, "auth": {"tokens": TOKENS}}
        )
    )
    helm_status = run_helm(kube, "status", RELEASE, "--namespace", NAMESPACE, "-o", "json")
    installed = json.loads(helm_status.stdout)["version"]
    token = {"Authorization": f"Bearer {TOKEN}"}

    def post(url: str, batch: int, headers: dict[str, str]) -> httpx.Response:
        event = progress_event(group, batch, topic)
        return httpx.post(f"{url}/v1/progress", json=event, headers=headers, timeout=30)

    def query(url: str) -> httpx.Response:
        return httpx.get(f"{url}/v1/queries/q-{group}", headers=token, timeout=10)

    started = time.monotonic()
    run_helm(
        kube, "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
        "-f", str(values),
    )  # fmt: skip
    try:
        pod = ready_pod(kube)
        upgraded = time.monotonic()
        url = f"http://{pod['status']['podIP']}:8000"
        refused = post(url, 1, {})
        assert refused.status_code == 401, refused.text
        assert query(url).status_code == 404, "a refused event was stored"
        for batch in (1, 2, 3):
            answer = post(url, batch, token)
            assert answer.status_code == 200, answer.text
        wait_for_committed(bootstrap, [group], {(topic, 0): 30})

        # the pod deleted (kubectl waits until it is gone), the Deployment's new pod on
        # the same claim
        committed = time.monotonic()
        kube.kubectl("-n", NAMESPACE, "delete", "pod", pod["metadata"]["name"])
        deleted = time.monotonic()
        restarted = ready_pod(kube)
        ready = time.monotonic()
        assert restarted["metadata"]["uid"] != pod["metadata"]["uid"]
        url = f"http://{restarted['status']['podIP']}:8000"
        kept = query(url)
        assert kept.status_code == 200, kept.text
        view = kept.json()
        assert view["group_id"] == group
        assert view["last_completed_checkpoint"] == 3, view
        answer = post(url, 4, token)
        assert answer.status_code == 200, answer.text
        wait_for_committed(bootstrap, [group], {(topic, 0): 40})
        # the query released (DELETE): the database holds what the other tests put there
        released = httpx.delete(f"{url}/v1/queries/q-{group}", headers=token, timeout=10)
        assert released.status_code == 200, released.text
        done = time.monotonic()
    finally:
        run_helm(kube, "rollback", RELEASE, str(installed), "--namespace", NAMESPACE)
    ready_pod(kube)
    print(
        f"upgraded and Ready {upgraded - started:.0f} s, 3 commits {committed - upgraded:.0f} s, "
        f"pod deleted {deleted - committed:.0f} s, new one Ready {ready - deleted:.0f} s, "
        f"commit {done - ready:.0f} s, rolled back {time.monotonic() - done:.0f} s"
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
