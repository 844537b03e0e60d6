"""The chart on a real Kubernetes API server (harness/kube_api.py: kube-apiserver and
kube-controller-manager over kine, no node): installed, upgraded, rolled back and applied
as a GitOps tool renders it, in namespaces that enforce PodSecurity ``restricted``, with
the Prometheus Operator's CRDs served. Every object is accepted, the Pods the
controller-manager creates pass admission (Pending: there is no node), no warning comes
back, and the token Secret keeps its value through every step."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from harness.kube_api import KubeApi
from tests.support.helm import CHART, PRODUCTION, prometheus_operator_crds
from tests.support.kubernetes import restricted_namespace, run_helm
from tests.support.service import wait_for

pytestmark = pytest.mark.tools  # kube-apiserver, kine, helm (make tools)

RELEASE = "spark-offset-sidecar"  # the manual's release name, so the chart's full name
IMAGE = ["--set", "image.repository=registry.example.com/spark-offset-sidecar"]
# Every values file of the chart's ci/ folder, each installed into a namespace of its own.
VALUES = {path.name.removesuffix("-values.yaml"): path for path in sorted(CHART.glob("ci/*.yaml"))}
TOKENS_JSON = json.dumps(
    {"tokens": [{"name": "jobs", "token": "t" * 40, "write": ["*"], "read": ["*"]}]}
)


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeApi]:
    api = KubeApi().start()
    try:
        yield api
    finally:
        api.stop()


class Journal:
    """What each step did, printed as it goes (``pytest -s``) and in a failure's message."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.hashes: dict[str, list[str]] = {}

    def __call__(self, line: str) -> None:
        print(line)
        self.lines.append(line)

    def token(self, namespace: str, digest: str) -> str:
        """Note the token's hash in ``namespace``; answer "BEFORE -> NOW"."""
        seen = self.hashes.setdefault(namespace, [])
        before = seen[-1] if seen else "none"
        seen.append(digest)
        return f"{before} -> {digest}"

    def __str__(self) -> str:
        return "\n".join(self.lines)


def test_the_chart_on_a_real_api_server(kube: KubeApi) -> None:
    journal = Journal()
    crds = prometheus_operator_crds()
    for crd in ("servicemonitors", "prometheusrules"):
        applied = kube.kubectl(
            "apply", "--server-side", "-f", str(crds / f"monitoring.coreos.com_{crd}.yaml")
        )
        assert not applied.stderr, applied.stderr
        kube.kubectl(
            "wait", "--for=condition=Established", f"crd/{crd}.monitoring.coreos.com",
            "--timeout=60s",
        )  # fmt: skip
    version = json.loads(kube.kubectl("version", "-o", "json").stdout)["serverVersion"]
    journal(f"API server {version['gitVersion']}; CRDs ServiceMonitor, PrometheusRule served")
    try:
        _steps(kube, journal)
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n--- the steps so far:\n{journal}") from None


def _steps(kube: KubeApi, journal: Journal) -> None:
    # Default values: the chart generates the token and keeps it with `lookup`.
    restricted_namespace(kube, "default-values")
    step(kube, journal, "default-values", "install", ["install", *IMAGE])
    changed = [*IMAGE, "--set", "settings.logLevel=DEBUG", "--set", "resources.limits.memory=1Gi"]
    step(kube, journal, "default-values", "upgrade", ["upgrade", *changed])
    step(kube, journal, "default-values", "rollback", ["rollback"])

    # Each ci/ values file; the production one (replicas on PostgreSQL, tokens from an
    # existing Secret) upgraded and rolled back too.
    for name, path in VALUES.items():
        restricted_namespace(kube, name)
        secrets_for(kube, journal, name, yaml.safe_load(path.read_text()))
        step(kube, journal, name, "install", ["install", *IMAGE, "-f", str(path)])
    changed = [
        *IMAGE,
        "-f",
        str(PRODUCTION),
        "--set",
        "replicaCount=4",
        "--set",
        "settings.logLevel=DEBUG",
    ]
    step(kube, journal, "production", "upgrade", ["upgrade", *changed])
    step(kube, journal, "production", "rollback", ["rollback"])

    # GitOps: rendered without the cluster (Argo CD, Flux), the token from a Secret named
    # in the values, applied server-side; rendered and applied again, as the next sync
    # does: the second changes nothing.
    restricted_namespace(kube, "gitops")
    secrets_for(kube, journal, "gitops", {"auth": {"existingSecret": "sidecar-tokens"}})
    render = [
        "template", RELEASE, str(CHART), "--namespace", "gitops", *IMAGE,
        "--set", "auth.existingSecret=sidecar-tokens",
        "--kube-version", kube_version(kube), "--api-versions", "monitoring.coreos.com/v1",
    ]  # fmt: skip
    generations = []
    for attempt in ("render, apply", "render, apply again"):
        manifests = run_helm(kube, *render).stdout
        applied = kube.kubectl(
            "apply", "--server-side", "--field-manager=gitops", "-n", "gitops", "-f", "-",
            input=manifests,
        )  # fmt: skip
        assert not applied.stderr, f"kubectl apply warned: {applied.stderr}"
        record(kube, journal, "gitops", attempt, manifests, applied.stderr)
        generations.append(deployment(kube, "gitops")["metadata"]["generation"])
    assert generations[0] == generations[1], f"the second apply rolled the pods: {generations}"
    # One token a namespace, from its first step (or its Secret made before) to its last.
    for name, hashes in journal.hashes.items():
        assert len(set(hashes)) == 1, f"{name}: the token changed: {' -> '.join(hashes)}"


def secrets_for(kube: KubeApi, journal: Journal, name: str, values: dict[str, Any]) -> None:
    """The Secrets ``values`` name, made beforehand as the manual's pages do."""

    def named(*path: str) -> str:
        found: Any = values
        for key in path:
            found = found.get(key, {}) if isinstance(found, dict) else {}
        return found if isinstance(found, str) else ""

    wanted = {
        named("auth", "existingSecret"): {"tokens.json": TOKENS_JSON},
        named("database", "postgresql", "existingSecret"): {"url": "postgresql+psycopg://u:p@db/s"},
        named("kafka", "sasl", "existingSecret"): {"password": "a password"},
        named("kafka", "tls", "existingSecret"): {"ca.crt": "a CA"},
    }
    for secret, data in wanted.items():
        if secret:
            literals = [f"--from-literal={key}={value}" for key, value in data.items()]
            kube.kubectl("-n", name, "create", "secret", "generic", secret, *literals)
    tokens = named("auth", "existingSecret")
    if tokens:
        digest = token_hash(kube, name, tokens)
        journal(f"{name}: Secret {tokens} made: token {journal.token(name, digest)}")


def step(kube: KubeApi, journal: Journal, name: str, what: str, args: list[str]) -> None:
    """``helm install|upgrade|rollback`` of the release in namespace ``name``; then the
    objects of its manifest, the Deployment's pods and the token recorded."""
    if what == "rollback":
        command = ["rollback", RELEASE, "1"]
    else:
        command = [args[0], RELEASE, str(CHART), *args[1:]]
    done = run_helm(kube, *command, "--namespace", name)
    manifest = run_helm(kube, "get", "manifest", RELEASE, "--namespace", name).stdout
    record(kube, journal, name, f"helm {what}", manifest, done.stderr)


def record(
    kube: KubeApi, journal: Journal, name: str, what: str, manifest: str, stderr: str
) -> None:
    """Check and write down one step: every object of ``manifest`` is in the cluster, the
    Deployment's newest ReplicaSet has made all its pods (admitted, Pending), and no
    warning came back from the step or from the pods' admission."""
    docs = [doc for doc in yaml.safe_load_all(manifest) if doc]
    found = kube.kubectl("-n", name, "get", "-f", "-", "-o", "json", input=manifest)
    items = json.loads(found.stdout)
    items = items.get("items", [items])
    accepted = sorted(f"{item['kind']}/{item['metadata']['name']}" for item in items)
    assert len(accepted) == len(docs), (accepted, docs)
    pods = newest_pods(kube, name)
    warnings = [line for line in stderr.splitlines() if line.strip()]
    warnings += admission_warnings(kube, name, pods[0])
    assert not warnings, f"{name}, {what}: warnings {warnings}"
    secret = token_secret(docs)
    tokens = (
        f"token {journal.token(name, token_hash(kube, name, secret))} (Secret {secret})"
        if secret
        else "no token"
    )
    journal(f"{name}: {what}: {len(accepted)} objects accepted: {', '.join(accepted)}")
    journal(f"{name}: {what}: {len(pods)} pods made, admitted, {phases(pods)}; no warning")
    journal(f"{name}: {what}: {tokens}")


def phases(pods: list[dict[str, Any]]) -> str:
    return ", ".join(sorted({pod["status"].get("phase", "?") for pod in pods}))


def deployment(kube: KubeApi, name: str) -> dict[str, Any]:
    (found,) = kube.get("-n", name, "deployments")["items"]
    return dict(found)


def newest_pods(kube: KubeApi, name: str) -> list[dict[str, Any]]:
    """The pods of the Deployment's newest ReplicaSet, once it has made all of them; a
    ReplicaSet whose pods admission refused fails at once, naming why."""

    def made() -> list[dict[str, Any]] | None:
        wanted = deployment(kube, name)
        status = wanted.get("status", {})
        if status.get("observedGeneration") != wanted["metadata"]["generation"]:
            return None
        revision = (
            wanted["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision")
        )
        sets = kube.get("-n", name, "replicasets")["items"]
        newest = [
            rs
            for rs in sets
            if rs["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision")
            == revision
        ]
        if not newest:
            return None
        (rs,) = newest
        for condition in rs.get("status", {}).get("conditions", []):
            assert condition["type"] != "ReplicaFailure", f"{name}: {condition['message']}"
        want = rs["spec"]["replicas"]
        uid = rs["metadata"]["uid"]
        pods = [
            pod
            for pod in kube.get("-n", name, "pods")["items"]
            if uid in {ref["uid"] for ref in pod["metadata"].get("ownerReferences", [])}
        ]
        return pods if want and len(pods) == want else None

    found: list[dict[str, Any]] = wait_for(made, timeout=120, what=f"{name}'s pods")
    return found


def admission_warnings(kube: KubeApi, name: str, pod: dict[str, Any]) -> list[str]:
    """What admission says of a pod the controller-manager made, created again under
    another name with ``--dry-run=server`` (PodSecurity's warnings come back to the
    client, which the controller-manager does not show)."""
    again = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{pod['metadata']['name']}-again", "labels": {"check": "admission"}},
        "spec": pod["spec"],
    }
    done = kube.kubectl(
        "-n", name, "create", "--dry-run=server", "-f", "-", input=json.dumps(again)
    )
    return [line for line in done.stderr.splitlines() if line.strip()]


def token_secret(docs: list[dict[str, Any]]) -> str:
    """The name of the Secret the pod reads its tokens from ("" if none)."""
    for doc in docs:
        if doc["kind"] == "Deployment":
            for volume in doc["spec"]["template"]["spec"]["volumes"]:
                if volume["name"] == "tokens":
                    return str(volume["secret"]["secretName"])
    return ""


def token_hash(kube: KubeApi, name: str, secret: str) -> str:
    """The first 16 hex digits of the SHA-256 of the Secret's tokens.json."""
    data = kube.get("-n", name, "secret", secret)["data"]
    return hashlib.sha256(base64.b64decode(data["tokens.json"])).hexdigest()[:16]


def kube_version(kube: KubeApi) -> str:
    """The server's version, as a GitOps tool passes it to ``helm template``."""
    found = json.loads(kube.kubectl("version", "-o", "json").stdout)
    return str(found["serverVersion"]["gitVersion"])
