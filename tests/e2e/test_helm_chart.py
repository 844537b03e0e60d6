"""The Helm chart: rendered by helm itself (built from the Go module proxy by ``make tools``)
for the default values and a production-like file, every object validated against
Kubernetes' own JSON schemas (kubernetes-validate, strict) and the Prometheus Operator's
CRD schemas; the alerts and the dashboard query only metrics the service really exports."""

from __future__ import annotations

import ast
import base64
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from fastapi.testclient import TestClient

from spark_offset_listener.listener import OffsetCommitListener
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import BrokerUnavailable
from spark_offset_sidecar.http.auth import TokenRegistry
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.settings.service_settings import REMOVED
from spark_offset_sidecar.testing import (
    InMemoryCommitter,
    InMemoryLogEnds,
    InMemoryRecordTimes,
    MemoryKafka,
    StaticVerifier,
)
from tests.support.app import doubles, post_progress, settings_for
from tests.support.helm import (
    CHART,
    KUBERNETES,
    PRODUCTION,
    by_kind,
    helm,
    prometheus_operator_crds,
    refused,
    render,
    render_as,
)
from tests.support.manual import shell_blocks
from tests.support.service import QUERY, metric, wait_for

pytestmark = pytest.mark.tools  # helm (make tools)


def crd_schemas() -> dict[str, dict[str, Any]]:
    crds = prometheus_operator_crds()
    schemas = {}
    for kind, file in [
        ("ServiceMonitor", "monitoring.coreos.com_servicemonitors.yaml"),
        ("PrometheusRule", "monitoring.coreos.com_prometheusrules.yaml"),
    ]:
        crd = yaml.safe_load((crds / file).read_text())
        served = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
        schemas[kind] = strict(served["schema"]["openAPIV3Schema"])
    return schemas


def strict(schema: Any) -> Any:
    """The CRD schema refusing unknown fields (the API server would silently prune them)."""
    if isinstance(schema, dict):
        schema = {key: strict(value) for key, value in schema.items()}
        open_ended = "additionalProperties" in schema or schema.get(
            "x-kubernetes-preserve-unknown-fields"
        )
        if "properties" in schema and not open_ended:
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [strict(value) for value in schema]
    return schema


def validate(docs: list[dict[str, Any]]) -> None:
    schemas: dict[str, dict[str, Any]] | None = None
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            schemas = schemas or crd_schemas()
            # Not validate(): the CRDs' patterns are Go regexes, which Python cannot compile
            # all of; only the fields that are present are checked.
            jsonschema.Draft7Validator(schemas[doc["kind"]]).validate(doc)
        else:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)


EXAMPLES = sorted(p.name.removesuffix("-values.yaml") for p in (CHART / "ci").glob("*.yaml"))


@pytest.mark.parametrize("values", ["default", *EXAMPLES])
def test_chart_lints_renders_and_validates(values: str) -> None:
    """The default values and every example the chart ships (ci/), linted as strictly as
    Helm lints (warnings fail too: what a chart repository's checks refuse)."""
    args = ["-f", str(CHART / "ci" / f"{values}-values.yaml")] if values != "default" else []
    lint = subprocess.run(
        [helm(), "lint", "--strict", str(CHART), *args], capture_output=True, text=True
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(*args)
    validate(docs)
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "spark-offset-sidecar"
        assert labels["app.kubernetes.io/instance"] == "r"


def test_default_values_sqlite_on_a_volume_one_pod_and_a_generated_token(tmp_path: Path) -> None:
    kinds = by_kind(render())
    deployment = kinds["Deployment"][0]["spec"]
    assert (deployment["replicas"], deployment["strategy"]["type"]) == (1, "Recreate")
    pod = deployment["template"]
    assert {"checksum/config", "checksum/secret"} <= pod["metadata"]["annotations"].keys()
    spec = pod["spec"]
    (migrate,) = spec["initContainers"]
    (server,) = spec["containers"]
    assert (migrate["args"], server["args"]) == (["migrate"], ["serve"])
    for container in (migrate, server):
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/data", "/tmp"}
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["enableServiceLinks"] is False  # no SIDECAR_* from the namespace's Services
    assert server["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert server["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert kinds["PersistentVolumeClaim"][0]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    config = kinds["ConfigMap"][0]["data"]
    assert config["SIDECAR_DATABASE_URL"] == "sqlite:////data/sidecar.db"
    assert config["SIDECAR_TOKENS_FILE"] == "/etc/sidecar/tokens/tokens.json"
    (secret,) = kinds["Secret"]
    tokens = json.loads(base64.b64decode(secret["data"]["tokens.json"]))
    assert tokens["tokens"][0]["write"] == tokens["tokens"][0]["read"] == ["*"]
    assert len(tokens["tokens"][0]["token"]) >= 16  # the service's minimum
    tokens_file = tmp_path / "tokens.json"  # the service itself accepts what the chart wrote
    tokens_file.write_text(json.dumps(tokens))
    (grant,) = TokenRegistry.from_file(str(tokens_file)).grants
    assert grant.may_write("any-group")
    assert grant.may_read("any-group")
    assert kinds["PodDisruptionBudget"][0]["spec"]["maxUnavailable"] == 1
    assert "ServiceMonitor" not in kinds
    assert "PrometheusRule" not in kinds


@pytest.mark.parametrize("values", ["default", "production"])
def test_one_container_answers_every_route_on_the_services_one_port(
    values: str, tmp_path: Path
) -> None:
    """The service runs one way: ``serve`` starts its watcher (and on SQLite its writer) as
    children in its own container and answers every route, /ui and /v1/status included,
    on its one port, replicas too. So one container, one Service port (scraped there), and
    none of the removed variables anywhere in the manifests; the service accepts the
    ConfigMap, and a former values file's ``watcher`` is refused, named."""
    args = ["-f", str(PRODUCTION)] if values == "production" else []
    text = subprocess.run(
        [helm(), "template", "r", str(CHART), "--kube-version", KUBERNETES, *args],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    kinds = by_kind([doc for doc in yaml.safe_load_all(text) if doc])
    (deployment,) = kinds["Deployment"]
    (server,) = deployment["spec"]["template"]["spec"]["containers"]
    assert server["args"] == ["serve"]
    assert server["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    (service,) = kinds["Service"]
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}
    ]
    for monitor in kinds.get("ServiceMonitor", []):
        assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["http"]
    for variable in REMOVED:  # the variables of the ways of running that are gone
        assert variable not in text, variable
    config = next(c for c in kinds["ConfigMap"] if "SIDECAR_PORT" in c["data"])["data"]
    environ = _settings_of(config, tmp_path)
    if values == "production":  # the Secret's key, as the container reads it
        environ["SIDECAR_DATABASE_URL"] = "postgresql+psycopg://u:p@db/s"
    assert Settings.from_env(environ).http.port == 8000
    assert "Additional property watcher is not allowed" in refused(
        *args, "--set", "watcher.enabled=true"
    )


def test_production_values_postgresql_from_a_secret_and_monitoring() -> None:
    kinds = by_kind(render("-f", str(PRODUCTION)))
    assert "PersistentVolumeClaim" not in kinds
    assert "Secret" not in kinds  # every secret is the user's own
    deployment = kinds["Deployment"][0]["spec"]
    assert deployment["replicas"] == 3
    assert deployment["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert kinds["PodDisruptionBudget"][0]["spec"]["maxUnavailable"] == 1
    spec = deployment["template"]["spec"]
    (server,) = spec["containers"]
    (url,) = [e for e in server["env"] if e["name"] == "SIDECAR_DATABASE_URL"]
    assert url["valueFrom"]["secretKeyRef"] == {"name": "sidecar-database", "key": "url"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["tokens"]["secret"]["secretName"] == "sidecar-tokens"
    assert volumes["kafka-password"]["secret"]["secretName"] == "sidecar-kafka"
    assert volumes["kafka-tls"]["secret"]["secretName"] == "kafka-ca"
    config = next(c for c in kinds["ConfigMap"] if "SIDECAR_PORT" in c["data"])["data"]
    assert "SIDECAR_DATABASE_URL" not in config
    assert (config["SIDECAR_REPLICATED"], config["SIDECAR_LEASE_SECONDS"]) == ("true", "30")
    assert config["SIDECAR_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
    assert config["SIDECAR_EXPORT_KAFKA_LAG"] == "true"
    assert kinds["ServiceMonitor"][0]["spec"]["endpoints"][0]["path"] == "/metrics"
    assert kinds["ServiceMonitor"][0]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    alerts = [r["alert"] for r in kinds["PrometheusRule"][0]["spec"]["groups"][0]["rules"]]
    assert "SparkOffsetSidecarNoSuccessfulCommit" in alerts
    dashboard = next(c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("dashboard"))
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["spark-offset-sidecar.json"])["panels"]


def test_every_alert_links_its_runbook_where_the_manual_serves_it(tmp_path: Path) -> None:
    """A runbook_url is followed to the letter: the manual is built as a site (what
    ``make docs`` serves), and base + the URL's path is a page of it. Without a base URL
    no runbook_url is rendered (a repository path is not a link); the page is named."""

    def rules(*args: str) -> list[dict[str, Any]]:
        kinds = by_kind(render("--set", "metrics.prometheusRule.enabled=true", *args))
        found: list[dict[str, Any]] = kinds["PrometheusRule"][0]["spec"]["groups"][0]["rules"]
        return found

    root = CHART.parent.parent
    subprocess.run(
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--quiet", "-d", str(tmp_path)],
        cwd=root, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    base = "https://docs.example/spark-offset-sidecar"
    published = rules("--set", f"metrics.prometheusRule.runbookBaseUrl={base}/")
    for rule in published:
        url = rule["annotations"]["runbook_url"]
        assert url.startswith(base + "/"), url
        served = tmp_path / url.removeprefix(base + "/") / "index.html"
        assert served.is_file(), f"{rule['alert']}: {url} is not a page of the built manual"
        assert rule["alert"] in served.read_text()
    for rule in rules():
        alert = rule["alert"]
        assert "runbook_url" not in rule["annotations"], "a path is not a URL"
        assert f"docs/operate/runbooks/{alert}.md" in rule["annotations"]["runbook"]
        assert (root / "docs" / "operate" / "runbooks" / f"{alert}.md").is_file()
    assert "runbookBaseUrl" in refused(
        "--set",
        "metrics.prometheusRule.enabled=true",
        "--set",
        "metrics.prometheusRule.runbookBaseUrl=docs.example",
    )


def test_the_commit_interval_reaches_the_service_and_is_bounded() -> None:
    def config(*args: str) -> dict[str, str]:
        kinds = by_kind(render(*args))
        data: dict[str, str] = next(c for c in kinds["ConfigMap"] if "SIDECAR_PORT" in c["data"])[
            "data"
        ]
        return data

    assert config()["SIDECAR_MIN_COMMIT_INTERVAL_SECONDS"] == "0"
    set_one = config("--set-json", "settings.minCommitIntervalSeconds=1.5")
    assert set_one["SIDECAR_MIN_COMMIT_INTERVAL_SECONDS"] == "1.5"
    assert "settings.minCommitIntervalSeconds" in refused(
        "--set", "settings.minCommitIntervalSeconds=7200"
    )


def test_a_changed_setting_changes_the_pods_checksum() -> None:
    def checksum(*args: str) -> str:
        deployment = by_kind(render(*args))["Deployment"][0]
        annotations: dict[str, str] = deployment["spec"]["template"]["metadata"]["annotations"]
        return annotations["checksum/config"]

    assert checksum() == checksum()
    assert checksum() != checksum("--set", "settings.logLevel=DEBUG")


def test_a_render_without_a_cluster_is_stable_only_with_an_existing_secret() -> None:
    """``helm template`` (Argo CD) twice: the generated token, which Helm's lookup cannot
    read back without a cluster, and so the pods' checksum/secret differ at each render;
    with auth.existingSecret, as docs/run/kubernetes.md says for GitOps, the chart renders
    no token Secret, mounts that one, and two renders are the same."""

    def rendered(*args: str) -> tuple[str | None, str, list[dict[str, Any]]]:
        docs = render(*args)
        kinds = by_kind(docs)
        secrets = {s["metadata"]["name"]: s for s in kinds.get("Secret", [])}
        token = secrets.get("r-spark-offset-sidecar-tokens")
        value = None
        if token is not None:
            value = json.loads(base64.b64decode(token["data"]["tokens.json"]))["tokens"][0]["token"]
        pod = kinds["Deployment"][0]["spec"]["template"]
        return value, pod["metadata"]["annotations"]["checksum/secret"], docs

    first, second = rendered(), rendered()
    assert first[0]
    assert second[0]
    assert first[0] != second[0]  # a new token at each render
    assert first[1] != second[1]  # and the pods roll at each sync
    gitops = ("--set", "auth.existingSecret=sidecar-tokens")
    one, two = rendered(*gitops), rendered(*gitops)
    assert one[0] is None  # no token Secret of the chart's
    assert one[2] == two[2]  # every object the same, the checksum included
    pod = by_kind(one[2])["Deployment"][0]["spec"]["template"]["spec"]
    (tokens,) = [v for v in pod["volumes"] if v["name"] == "tokens"]
    assert tokens["secret"]["secretName"] == "sidecar-tokens"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--set", "replicaCount=2"], "replicaCount > 1 needs database.type=postgresql"),
        (["--set", "database.type=postgresql"], "database.postgresql.existingSecret"),
        (["--set", "settings.logLevel=LOUD"], "settings.logLevel"),
        (["--set", "kafka.securityProtocol=SASL_SSL"], "kafka.sasl.username"),
        (["--set", "kafka.bootstrapServers=kafka"], "kafka.bootstrapServers"),
        (["--set", "extraEnv.LOG_LEVEL=x"], "extraEnv"),
        (["--set", "kafka.securityProtocol=SASL_SSL", "--set", "kafka.sasl.mechanism=OAUTHBEARER",
          "--set", "kafka.sasl.password=x"], "kafka.sasl.oauth.tokenUrl"),
        (["--set", "kafka.sasl.mechanism=GSSAPI"], "kafka.sasl.mechanism"),
        (["--set", "auth.identities[0].name=a", "--set", "auth.identities[0].subject=*"],
         "auth.oidc.issuer"),
        (["--set", "extraSecretMounts[0].secretName=s",
          "--set", "extraSecretMounts[0].mountPath=/etc/sidecar/kafka"], "extraSecretMounts"),
        (["--set", "extraSecretMounts[0].secretName=s",
          "--set", "extraSecretMounts[0].mountPath=etc/ca"], "extraSecretMounts"),
        (["--set", "extraSecretMounts[0].mountPath=/etc/ca"], "extraSecretMounts"),
    ],
)  # fmt: skip
def test_bad_values_are_refused_naming_the_value(args: list[str], named: str) -> None:
    assert named in refused(*args)


def _settings_of(config: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The ConfigMap as the service would read it, its files here with the same content
    kind (the service checks that every file it is given exists)."""
    env = {}
    for name, value in config.items():
        if value.startswith("/etc/sidecar/"):
            local = tmp_path / value.removeprefix("/etc/sidecar/")
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text("{}" if local.suffix == ".json" else "a-secret-from-a-volume")
            value = str(local)
        env[name] = value
    return env


def test_oauthbearer_msk_iam_and_jobs_identities_reach_the_service(tmp_path: Path) -> None:
    """What the chart's values for the identities production has become: settings the
    service accepts, the volumes they name, and the identities in the tokens file."""
    oauth = by_kind(render(
        "--set", "kafka.securityProtocol=SASL_SSL",
        "--set", "kafka.sasl.mechanism=OAUTHBEARER",
        "--set", "kafka.sasl.oauth.tokenUrl=https://idp.example/oauth2/token",
        "--set", "kafka.sasl.oauth.clientId=sidecar",
        "--set", "kafka.sasl.oauth.scope=kafka",
        "--set", "kafka.sasl.oauth.extensions.logicalCluster=lkc-1",
        "--set", "kafka.sasl.oauth.extensions.identityPoolId=pool-2",
        "--set", "kafka.sasl.existingSecret=kafka-oauth",
        "--set", "auth.oidc.inCluster=true",
        "--set", "auth.identities[0].name=team-a",
        "--set", "auth.identities[0].subject=system:serviceaccount:team-a:*",
        "--set", "auth.identities[0].write[0]=team-a-*",
    ))  # fmt: skip
    validate([doc for docs in oauth.values() for doc in docs])
    config = oauth["ConfigMap"][0]["data"]
    assert config["SIDECAR_KAFKA_SASL_EXTENSIONS"] == "identityPoolId=pool-2,logicalCluster=lkc-1"
    assert config["SIDECAR_OIDC_JWKS_URL"] == "https://kubernetes.default.svc/openid/v1/jwks"
    assert "SIDECAR_KAFKA_SASL_USERNAME" not in config
    settings = Settings.from_env(_settings_of(config, tmp_path))
    assert settings.kafka.sasl_mechanism == "OAUTHBEARER"
    assert settings.oidc.issuer == "https://kubernetes.default.svc.cluster.local"
    spec = oauth["Deployment"][0]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["kafka-password"]["secret"]["secretName"] == "kafka-oauth"
    sources = volumes["kube-api"]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    (secret,) = oauth["Secret"]
    document = json.loads(base64.b64decode(secret["data"]["tokens.json"]))
    assert document["identities"][0]["subject"] == "system:serviceaccount:team-a:*"
    tokens_file = tmp_path / "chart-tokens.json"
    tokens_file.write_text(json.dumps(document))
    registry = TokenRegistry.from_file(str(tokens_file), StaticVerifier({}))
    assert [rule.grant.name for rule in registry.identities] == ["team-a"]

    msk = by_kind(render(
        "--set", "kafka.securityProtocol=SASL_SSL",
        "--set", "kafka.sasl.mechanism=AWS_MSK_IAM",
        "--set", "kafka.sasl.aws.region=eu-west-1",
        "--set", "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/x",
    ))  # fmt: skip
    validate([doc for docs in msk.values() for doc in docs])
    config = msk["ConfigMap"][0]["data"]
    assert config["SIDECAR_KAFKA_AWS_REGION"] == "eu-west-1"
    assert "SIDECAR_KAFKA_SASL_PASSWORD_FILE" not in config
    assert Settings.from_env(_settings_of(config, tmp_path)).kafka.aws_region == "eu-west-1"
    assert "kafka-password" not in {
        v["name"] for v in msk["Deployment"][0]["spec"]["template"]["spec"]["volumes"]
    }
    annotations = msk["ServiceAccount"][0]["metadata"]["annotations"]
    assert annotations == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}


@pytest.mark.parametrize(
    "issuer",
    [
        "",  # a cluster of your own: the in-cluster default
        "https://oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE",
        "https://container.googleapis.com/v1/projects/p/locations/europe-west1/clusters/c",
        "https://westeurope.oic.prod-aks.azure.com/00000000-0000-0000-0000-000000000000/"
        "11111111-1111-1111-1111-111111111111/",
    ],
)
def test_a_managed_clusters_issuer_reaches_the_service(issuer: str, tmp_path: Path) -> None:
    """auth.oidc.issuer (docs/secure/workload-identity.md: EKS, GKE, AKS) is the issuer the
    pod's service checks tokens against, character for character, its keys still read from
    the API server with inCluster; without it, the in-cluster default."""
    kinds = by_kind(render(
        "-f", str(CHART / "ci" / "identities-values.yaml"),
        "--set", f"auth.oidc.issuer={issuer}",
    ))  # fmt: skip
    validate([doc for docs in kinds.values() for doc in docs])
    config = kinds["ConfigMap"][0]["data"]
    settings = Settings.from_env(_settings_of(config, tmp_path))
    assert settings.oidc.issuer == (issuer or "https://kubernetes.default.svc.cluster.local")
    assert settings.oidc.jwks_url == "https://kubernetes.default.svc/openid/v1/jwks"
    assert settings.oidc.ca_file is not None
    assert settings.oidc.bearer_token_file is not None


CLUSTERS = CHART / "ci" / "clusters-values.yaml"


def test_several_clusters_reach_the_service_with_files_from_their_secrets(tmp_path: Path) -> None:
    """Each more cluster's CA, client certificate and password are files of a Secret that
    extraSecretMounts mounts in both containers (migrations read the settings too)."""
    kinds = by_kind(render("-f", str(CLUSTERS)))
    validate([doc for docs in kinds.values() for doc in docs])
    pod = kinds["Deployment"][0]["spec"]["template"]["spec"]
    secrets = {
        v["name"]: v["secret"]["secretName"]
        for v in pod["volumes"]
        if v["name"].startswith("extra-secret-")
    }
    for container in pod["containers"] + pod["initContainers"]:
        mounted = {
            secrets[m["name"]]: (m["mountPath"], m.get("readOnly"))
            for m in container["volumeMounts"]
            if m["name"] in secrets
        }
        assert mounted == {
            "sidecar-kafka-eu-west": ("/etc/sidecar/kafka-eu-west", True),
            "sidecar-kafka-analytics": ("/etc/sidecar/kafka-analytics", True),
        }, container["name"]
    config = kinds["ConfigMap"][0]["data"]
    settings = Settings.from_env(_settings_of(config, tmp_path))
    assert settings.clusters.names == ("main", "eu-west", "analytics")
    eu = settings.for_cluster("eu-west")
    assert (eu.security_protocol, eu.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert eu.sasl_secret() == "a-secret-from-a-volume"
    assert eu.ssl_cafile == tmp_path / "kafka-eu-west" / "ca.crt"
    analytics = settings.for_cluster("analytics")
    assert analytics.security_protocol == "SSL"
    assert analytics.ssl_certfile == tmp_path / "kafka-analytics" / "tls.crt"
    assert analytics.ssl_keyfile == tmp_path / "kafka-analytics" / "tls.key"
    assert settings.clusters.choice().of("eu-orders").name == "eu-west"
    # Variables from a Secret still come through extraEnvFrom.
    env_from = by_kind(render("--set", "extraEnvFrom[0].secretRef.name=sidecar-kafka-eu"))
    container = env_from["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    assert {"secretRef": {"name": "sidecar-kafka-eu"}} in container["envFrom"]


def metric_names(text: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1].isalpha()}


def _names(query: str) -> set[str]:
    return set(re.findall(r"\b((?:sidecar|kafka)_[a-z_]+)\b", query))


def _rules_and_panels() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    kinds = by_kind(render("-f", str(PRODUCTION)))
    rules = kinds["PrometheusRule"][0]["spec"]["groups"][0]["rules"]
    dashboard = next(c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("dashboard"))
    panels = json.loads(dashboard["data"]["spark-offset-sidecar.json"])["panels"]
    return rules, panels


def test_a_healthy_service_exports_every_name_the_alerts_and_panels_query(
    tmp_path: Path,
) -> None:
    """A healthy group (committed at the log end, nothing deleted, commits succeeding)
    is in every series an alert or a panel reads, failures and skips at 0. Only a gauge
    the reference says has no value then may be absent, and a panel that shows it says so
    instead of "No data"; or a counter by reason, whose series appears with its first
    failure, when every alert reading it counts that appearance ("unless ... offset")."""
    from spark_offset_sidecar.observe.reference import series

    rules, panels = _rules_and_panels()
    tp = TopicPartition("orders", 0)
    ends = InMemoryLogEnds({tp: 10}, starts={tp: 0})
    settings = settings_for(tmp_path, export_kafka_lag=True, lag_read_interval_seconds=0.05)
    app = create_app(
        settings,
        doubles(settings, MemoryKafka(log_ends=ends, record_times=InMemoryRecordTimes())),
    )
    with TestClient(app) as client:
        for batch, offset in enumerate((10, 20, 30)):
            ends.ends[tp] = offset
            post_progress(client, batch, {"orders": {"0": offset}})
            reads = ends.reads
            wait_for(lambda: ends.reads >= reads + 2, what="two reads")  # noqa: B023
        text = wait_for(  # the counters come with the memory the watcher is told
            lambda: (
                (t := client.get("/metrics").text)
                and "sidecar_consumergroup_lag{" in t
                and "sidecar_commits_skipped_total{" in t
                and t
            ),
            what="the group's lag and counters",
        )
    group = {"consumergroup": "orders-app"}
    for name in ("sidecar_commits_failed_total", "sidecar_commits_skipped_total"):
        assert metric(text, name, **group) == 0, name
    assert metric(text, "sidecar_consumergroup_messages_lost_total", topic="orders", **group) == 0
    assert metric(text, "sidecar_consumergroup_lag", topic="orders", **group) == 0
    no_value = {s.name for s in series() if "has no value" in s.absent}
    first_failure = {s.name for s in series() if "first failure" in s.absent}
    missing = set().union(*(_names(r["expr"]) for r in rules)) - metric_names(text)
    assert missing <= no_value | first_failure, (
        f"alerts query what a healthy service lacks: {missing}"
    )
    for name in missing & first_failure:
        for rule in (r for r in rules if name in _names(r["expr"])):
            appears = re.search(rf"unless\s+{name}\s+offset", rule["expr"])
            assert appears, f"{rule['alert']} misses {name}'s first failure"
    for panel in panels:
        lacking = set().union(*(_names(t["expr"]) for t in panel["targets"])) - metric_names(text)
        assert lacking <= no_value, f"{panel['title']!r}: not exported: {lacking}"
        if lacking:
            assert panel["fieldConfig"]["defaults"].get("noValue"), panel["title"]


def test_alerts_and_dashboard_query_only_metrics_the_service_exports(tmp_path: Path) -> None:
    rules, panels = _rules_and_panels()
    queries = [r["expr"] for r in rules] + [t["expr"] for p in panels for t in p["targets"]]
    queries.append("label_values(sidecar_commits_succeeded_total, consumergroup)")
    used = set().union(*(_names(q) for q in queries))
    # Every series that can be absent is made present. "orders-app" lags, catches up, has
    # an old record and a moving log start; "lossy" is below the log start; then commits
    # fail (ERR), a newer checkpoint replaces a failing one (skipped), and a snapshot waits
    # (pending).
    tp = TopicPartition("orders", 0)
    ends = InMemoryLogEnds({tp: 100}, starts={tp: 10})
    times = InMemoryRecordTimes()
    times.stamp(tp, 50, 1.0)  # the first record after every committed offset here
    committer = InMemoryCommitter()
    settings = settings_for(tmp_path, export_kafka_lag=True, lag_read_interval_seconds=0.05)
    app = create_app(
        settings,
        doubles(settings, MemoryKafka(committer=committer, log_ends=ends, record_times=times)),
    )
    with TestClient(app) as client:
        post_progress(client, 0, {"orders": {"0": 5}}, group="lossy", query="q-lossy")
        for batch, offset in enumerate((20, 30, 40), start=1):
            post_progress(client, batch, {"orders": {"0": offset}})
            reads = ends.reads
            wait_for(lambda: ends.reads >= reads + 2, what="two reads")  # noqa: B023
            ends.starts[tp] += 1  # retention at work
        # Its catch-up estimate lasts while it catches up, here less than the second its
        # counters take to reach the watcher that exports them: taken from this scrape.
        catching_up = wait_for(
            lambda: (
                (t := client.get("/metrics").text)
                and "sidecar_consumergroup_catchup_seconds{" in t
                and t
            ),
            what="the catch-up estimate",
        )
        committer.fail_with = BrokerUnavailable("down")
        post_progress(client, 4, {"orders": {"0": 45}})
        post_progress(client, 5, {"orders": {"0": 46}})
        snapshot = {"checkpoint_id": 9, "group_id": "orders-app", "offsets": {"orders": {"0": 47}}}
        client.post(f"/v1/queries/{QUERY}/checkpoints", json=snapshot)
        text = wait_for(
            lambda: (
                (t := client.get("/metrics").text)
                and "sidecar_commits_skipped_total" in metric_names(t)
                and "kafka_consumergroup_lag{" in t
                and used <= metric_names(t) | metric_names(catching_up)
                and t
            ),
            what="every series",
        )
    exported = metric_names(text) | metric_names(catching_up)
    assert used <= exported, f"not exported: {sorted(used - exported)}"
    from spark_offset_sidecar.observe.reference import PER_GROUP, series

    documented = set()
    for s in series():  # a histogram's samples: _bucket, _count, _sum (and _created)
        suffixes = ("_bucket", "_count", "_sum", "_created") if s.kind == "histogram" else ("",)
        documented |= {s.name + suffix for suffix in suffixes}
        if s.kind == "counter" and s.scope != PER_GROUP:  # prometheus_client's creation time
            documented.add(s.name.removesuffix("_total") + "_created")
    assert exported <= documented, f"exported, not in the reference: {exported - documented}"


# The pages that tell a user how to install the chart, and what they say to create.
INSTALL_PAGES = [
    CHART.parent.parent / "docs" / "run" / "kubernetes.md",
    CHART.parent.parent / "docs" / "run" / "clusters.md",
    CHART / "README.template.md",
]


def _installs(page: Path) -> list[tuple[list[str], str]]:
    """Each block of ``page`` that installs the chart: its commands and its install line."""
    found = []
    for block in shell_blocks(page):
        installs = [c for c in block.commands if c.startswith("helm install")]
        if installs:
            found.append((block.commands, installs[0]))
    return found


def _secrets_read(docs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Every Secret the pods read, and the keys they read of it (a volume mounted whole:
    the files that the ConfigMap's settings point to inside it)."""
    kinds = by_kind(docs)
    made = {s["metadata"]["name"] for s in kinds.get("Secret", [])}
    settings: dict[str, str] = {}
    for config in kinds["ConfigMap"]:
        settings |= {k: v for k, v in config.get("data", {}).items() if k.startswith("SIDECAR_")}
    read: dict[str, set[str]] = {}
    pod = kinds["Deployment"][0]["spec"]["template"]["spec"]
    mounts = {
        m["name"]: m["mountPath"] for c in pod["containers"] for m in c.get("volumeMounts", [])
    }
    for container in pod["containers"] + pod.get("initContainers", []):
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                read.setdefault(ref["name"], set()).add(ref["key"])
    for volume in pod.get("volumes", []):
        secret = volume.get("secret")
        if not secret:
            continue
        if "items" in secret:
            keys = {item["key"] for item in secret["items"]}
        else:
            mount = mounts[volume["name"]] + "/"
            keys = {v.removeprefix(mount) for v in settings.values() if v.startswith(mount)}
        read.setdefault(secret["secretName"], set()).update(keys)
    return {name: keys for name, keys in read.items() if name not in made}


def test_the_secrets_a_page_creates_are_the_ones_the_values_read() -> None:
    """Followed to the letter, a page's Secrets are exactly those its install reads, with
    the keys it reads (a Secret named differently, or not created, fails the install)."""
    checked, installed = set(), set()
    for page in INSTALL_PAGES:
        for commands, install in _installs(page):
            installed |= {Path(w).name for w in shlex.split(install) if w.endswith(".yaml")}
            created: dict[str, set[str]] = {}
            for command in commands:
                words = shlex.split(command)
                if words[:1] == ["kubectl"] and "secret" in words:
                    name = words[words.index("generic") + 1]
                    created[name] = {
                        w.split("=", 2)[1] for w in words if w.startswith(("--from-literal=",
                                                                           "--from-file="))
                    }  # fmt: skip
            assert created == _secrets_read(render_as(install)), f"{page.name}: {install}"
            if created:
                checked.add(page)
    assert checked == set(INSTALL_PAGES), "each page shows the install that needs Secrets"
    # Every example that reads Secrets of yours is installed by a page that creates them.
    for values in sorted((CHART / "ci").glob("*-values.yaml")):
        if _secrets_read(render("-f", str(values))):
            assert values.name in installed, f"no page creates the Secrets {values.name} reads"


def test_the_manuals_kubernetes_names_are_the_ones_the_chart_renders() -> None:
    """The address jobs post to, the Deployment runbooks exec into and the Service they
    port-forward to are what the pages' own install renders."""
    root = CHART.parent.parent
    for page in INSTALL_PAGES:
        for _, install in _installs(page):
            kinds = by_kind(render_as(install))
            service, deployment = kinds["Service"][0], kinds["Deployment"][0]
            words = shlex.split(install)
            name, namespace = service["metadata"]["name"], words[words.index("-n") + 1]
            assert (name, namespace) == ("spark-offset-sidecar", "platform"), install
            assert deployment["metadata"]["name"] == name
            assert service["spec"]["ports"][0]["port"] == 8000
    manual = "\n".join(p.read_text() for p in (root / "docs").rglob("*.md"))
    hosts = set(re.findall(r"http://([a-z0-9-]+\.[a-z0-9-]+):8000", manual))
    assert hosts == {"spark-offset-sidecar.platform"}, hosts
    assert "kubectl -n platform exec deploy/spark-offset-sidecar -- " in manual
    assert "port-forward svc/spark-offset-sidecar 8000:8000" in manual
    other = render("--set", "fullnameOverride=offsets")
    assert by_kind(other)["Service"][0]["metadata"]["name"] == "offsets"


def _notes(tmp_path: Path, *args: str) -> str:
    """NOTES.txt as `helm install` prints it (helm template leaves it out: here it is
    rendered by the same engine, from a copy of the chart, as a ConfigMap's value)."""
    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy)
    shutil.copy(copy / "templates" / "NOTES.txt", copy / "notes.txt")
    (copy / "templates" / "zz-notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n'
    )
    out = subprocess.run(
        [helm(), "template", "r", str(copy), "--namespace", "data",
         "--show-only", "templates/zz-notes.yaml", *args],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    notes: str = yaml.safe_load(out)["data"]["notes"]
    return notes


@pytest.mark.parametrize("unauthenticated", [False, True])
def test_the_notes_show_each_listener_as_the_service_will_take_it(
    tmp_path: Path, unauthenticated: bool
) -> None:
    """Followed to the letter, the notes' listener lines reach the Service: with tokens
    (the chart's default) they carry one, which the Python listener takes by name."""
    args = ["--set", "auth.allowUnauthenticated=true"] if unauthenticated else []
    notes = _notes(tmp_path, *args)
    service = by_kind(render(*args))["Service"][0]
    url = f"http://{service['metadata']['name']}.data.svc:{service['spec']['ports'][0]['port']}"
    python = next(line for line in notes.splitlines() if "OffsetCommitListener(" in line)
    call = ast.parse(python.split(":", 1)[1].strip(), mode="eval").body
    assert isinstance(call, ast.Call)
    assert ast.literal_eval(call.args[0]) == url
    keywords = {k.arg for k in call.keywords}
    assert keywords <= set(inspect.signature(OffsetCommitListener).parameters)
    jvm = next(line for line in notes.splitlines() if "spark.offsetSidecar.url=" in line)
    assert f"spark.offsetSidecar.url={url} " in jvm + " "
    if unauthenticated:
        assert "token" not in python + jvm
    else:
        assert "token_file" in keywords
        assert "--conf spark.offsetSidecar.tokenFile=" in jvm
        assert "401" in notes
