"""The Helm chart: rendered by helm itself (built from the Go module proxy by ``make tools``)
for the default values and a production-like file, every object validated against
Kubernetes' own JSON schemas (kubernetes-validate, strict) and the Prometheus Operator's
CRD schemas; the alerts and the dashboard query only metrics the service really exports."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from fastapi.testclient import TestClient

from spark_offset_sidecar.app import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import BrokerUnavailable
from spark_offset_sidecar.http.auth import TokenRegistry
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.testing import (
    InMemoryCommitter,
    InMemoryLogEnds,
    InMemoryRecordTimes,
    StaticVerifier,
)
from tests.support.app import post_progress, settings_for
from tests.support.helm import CHART, KUBERNETES, PRODUCTION, by_kind, helm, refused, render
from tests.support.service import QUERY, wait_for

PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.78.2"


def crd_schemas() -> dict[str, dict[str, Any]]:
    found = subprocess.run(
        ["go", "mod", "download", "-json", PROMETHEUS_OPERATOR],
        check=True, capture_output=True, text=True, cwd="/tmp",
    )  # fmt: skip
    crds = Path(json.loads(found.stdout)["Dir"]) / "example" / "prometheus-operator-crd"
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


@pytest.mark.parametrize("values", ["default", "production", "identities"])
def test_chart_lints_renders_and_validates(values: str) -> None:
    files = {"production": PRODUCTION, "identities": CHART / "ci" / "identities-values.yaml"}
    args = ["-f", str(files[values])] if values in files else []
    lint = subprocess.run([helm(), "lint", str(CHART), *args], capture_output=True, text=True)
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


def test_every_alert_links_its_runbook_in_the_manual() -> None:
    def rules(*args: str) -> list[dict[str, Any]]:
        kinds = by_kind(render("--set", "metrics.prometheusRule.enabled=true", *args))
        found: list[dict[str, Any]] = kinds["PrometheusRule"][0]["spec"]["groups"][0]["rules"]
        return found

    manual = CHART.parent.parent / "docs"
    listed = (manual / "operate" / "alerts.md").read_text()
    for rule in rules():
        alert = rule["alert"]
        page = f"docs/operate/runbooks/{alert}.md"
        assert rule["annotations"]["runbook_url"] == page
        assert (manual.parent / page).is_file(), f"{alert} has no runbook"
        assert f"(runbooks/{alert}.md)" in listed, f"{alert} is not in the alerts page"
    published = rules("--set", "metrics.prometheusRule.runbookBaseUrl=https://docs.example/rb/")
    assert {r["annotations"]["runbook_url"] for r in published} == {
        f"https://docs.example/rb/{r['alert']}/" for r in published
    }
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
    assert settings.kafka_sasl_mechanism == "OAUTHBEARER"
    assert settings.oidc_issuer == "https://kubernetes.default.svc.cluster.local"
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
    assert Settings.from_env(_settings_of(config, tmp_path)).aws_region() == "eu-west-1"
    assert "kafka-password" not in {
        v["name"] for v in msk["Deployment"][0]["spec"]["template"]["spec"]["volumes"]
    }
    annotations = msk["ServiceAccount"][0]["metadata"]["annotations"]
    assert annotations == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}


def metric_names(text: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1].isalpha()}


def test_alerts_and_dashboard_query_only_metrics_the_service_exports(tmp_path: Path) -> None:
    kinds = by_kind(render("-f", str(PRODUCTION)))
    rules = kinds["PrometheusRule"][0]["spec"]["groups"][0]["rules"]
    dashboard = next(c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("dashboard"))
    queries = [r["expr"] for r in rules] + [
        t["expr"]
        for panel in json.loads(dashboard["data"]["spark-offset-sidecar.json"])["panels"]
        for t in panel["targets"]
    ]
    queries.append("label_values(sidecar_commits_succeeded_total, consumergroup)")
    used = {name for q in queries for name in re.findall(r"\b((?:sidecar|kafka)_[a-z_]+)\b", q)}
    # Every series appears only once it is not zero (absent means zero): the scenario makes
    # each one non-zero. "orders-app" lags, catches up, has an old record and a moving
    # log start; "lossy" is below the log start; then commits fail (ERR), a newer
    # checkpoint replaces a failing one (skipped), and a snapshot waits (pending).
    tp = TopicPartition("orders", 0)
    ends = InMemoryLogEnds({tp: 100}, starts={tp: 10})
    times = InMemoryRecordTimes()
    times.stamp(tp, 50, 1.0)  # the first record after every committed offset here
    committer = InMemoryCommitter()
    settings = settings_for(tmp_path, export_kafka_lag=True, lag_read_interval_seconds=0.05)
    app = create_app(settings, committer=committer, log_ends=ends, record_times=times)
    with TestClient(app) as client:
        post_progress(client, 0, {"orders": {"0": 5}}, group="lossy", query="q-lossy")
        for batch, offset in enumerate((20, 30, 40), start=1):
            post_progress(client, batch, {"orders": {"0": offset}})
            reads = ends.reads
            wait_for(lambda: ends.reads >= reads + 2, what="two reads")  # noqa: B023
            ends.starts[tp] += 1  # retention at work
        committer.fail_with = BrokerUnavailable("down")
        post_progress(client, 4, {"orders": {"0": 45}})
        post_progress(client, 5, {"orders": {"0": 46}})
        snapshot = {"checkpoint_id": 9, "group_id": "orders-app", "offsets": {"orders": {"0": 47}}}
        client.post(f"/v1/queries/{QUERY}/checkpoints", json=snapshot)
        text = wait_for(
            lambda: (
                (t := client.get("/metrics").text)
                and {"sidecar_commits_skipped_total", "sidecar_consumergroup_catchup_seconds"}
                <= metric_names(t)
                and "kafka_consumergroup_lag{" in t
                and t
            ),
            what="every series",
        )
    exported = metric_names(text)
    assert used <= exported, f"not exported: {sorted(used - exported)}"
