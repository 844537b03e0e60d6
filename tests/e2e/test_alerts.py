"""The chart's alerts and dashboard in a real Prometheus (Debian's ``prometheus`` package,
installed by ``make system-deps``).

1. ``promtool check rules`` and ``promtool test rules`` on the PrometheusRule that helm
   renders from the chart (not a copy), with the cases of ``alerts_test.yaml``: every
   alert fires in its case, and a healthy group beside it never alerts.
2. A real Prometheus scrapes a real service committing to the real broker, with the
   rendered rules (short ``for`` windows set through the chart's values): a group that
   stops committing while records keep arriving, a group whose commits fail, and a
   healthy group. The right alerts go pending or firing; the healthy group never alerts;
   every query of the dashboard returns series from that Prometheus.
3. promtool's cases of the critical SparkOffsetSidecarNoSuccessfulCommit fed the series a
   real service exports (scraped, names and labels) for a group that never committed and
   one that did.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from harness.machine import free_port, refuse_in_inner_loop
from harness.service_process import ServiceProcess
from tests.support.helm import by_kind, render
from tests.support.kafka import delete_records, produce, run_sync, unique_group
from tests.support.scenarios import three_groups
from tests.support.service import metric, spark_progress, wait_for

HERE = Path(__file__).parent
NAMESPACE = "data"  # the label Kubernetes' service discovery would give the series
NO_COMMIT = "SparkOffsetSidecarNoSuccessfulCommit"
NEVER_SUMMARY = "no successful offset commit for 900 s, and commits are failing"
NO_COMMIT_DESCRIPTION = (
    "Lag tools see this Spark job's group frozen. Reasons are in "
    "sidecar_commits_failed_by_reason_total; GET /v1/status/<group> shows the group."
)

pytestmark = pytest.mark.tools  # helm, promtool and Prometheus


def tool(name: str) -> str:
    refuse_in_inner_loop(f"runs {name} (a Debian package)")
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: run `make system-deps` (Debian's prometheus package)")
    return found


def rendered_rules(folder: Path, *values: str) -> dict[str, Any]:
    """The chart's PrometheusRule as a Prometheus rule file, written to folder/rules.yaml."""
    docs = render("--set", "metrics.prometheusRule.enabled=true", *values)
    spec: dict[str, Any] = by_kind(docs)["PrometheusRule"][0]["spec"]
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": spec["groups"]}))
    return spec


def alert_names(spec: dict[str, Any]) -> set[str]:
    return {rule["alert"] for group in spec["groups"] for rule in group["rules"]}


def test_promtool_checks_and_unit_tests_every_rule_of_the_chart(tmp_path: Path) -> None:
    spec = rendered_rules(tmp_path)
    checked = subprocess.run(
        [tool("promtool"), "check", "rules", str(tmp_path / "rules.yaml")],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    cases = yaml.safe_load((HERE / "alerts_test.yaml").read_text())
    tested = {
        check["alertname"]
        for case in cases["tests"]
        for check in case["alert_rule_test"]
        if check["exp_alerts"]
    }
    assert tested == alert_names(spec), "every alert of the chart has a case that fires"
    shutil.copy(HERE / "alerts_test.yaml", tmp_path)
    result = subprocess.run(
        [tool("promtool"), "test", "rules", str(tmp_path / "alerts_test.yaml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def run_promtool_cases(folder: Path, cases: dict[str, Any]) -> None:
    """``promtool test rules`` on ``cases`` (a test file's content) and folder/rules.yaml."""
    (folder / "cases.yaml").write_text(yaml.safe_dump(cases, sort_keys=False))
    result = subprocess.run(
        [tool("promtool"), "test", "rules", str(folder / "cases.yaml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# The values of each series a real service exports for the two groups of the test below,
# by the group's part and the series' name, one sample a minute: "never" fails a commit a
# minute from its first event and never commits; "recent" fails as often but commits too,
# every minute. The scrape decides which series there are: a series the service does not
# export for such a group cannot be fed, and one it exports cannot be left out.
NEVER_AND_RECENT = {
    ("never", "sidecar_commits_failed_total"): "0+1x40",
    ("recent", "sidecar_commits_failed_total"): "0+1x40",
    ("recent", "sidecar_last_successful_commit_timestamp_seconds"): "0+60x40",
}


def test_the_no_commit_alert_on_a_real_services_series_pages_for_a_group_never_committed(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Any
) -> None:
    """promtool's cases of SparkOffsetSidecarNoSuccessfulCommit fed the series a real
    service exports, names and labels as scraped: a group whose every commit Kafka refuses
    (its event names a partition the topic lacks) has failures and no
    sidecar_last_successful_commit_timestamp_seconds at all; it pages once the service has
    known it for noCommitForSeconds (900 s) and 5 minutes more. A group that committed
    within the window does not, though its commits fail as often."""
    spec = rendered_rules(tmp_path)
    (rule,) = [r for g in spec["groups"] for r in g["rules"] if r.get("alert") == NO_COMMIT]
    read = set(re.findall(r"\bsidecar_[a-z_]+\b", rule["expr"]))
    service = ServiceProcess(
        tmp_path, kafka_bootstrap, retry_initial_seconds=0.5, retry_max_seconds=1
    ).start()
    topic = new_topic(1)
    run_sync(produce(kafka_bootstrap, topic, 10))
    parts = {unique_group("never"): "never", unique_group("recent"): "recent"}
    never, recent = parts
    try:
        for group, offsets in ((recent, {"0": 10}), (never, {"0": 10, "7": 1})):
            answer = service.post_progress(group, spark_progress(0, {topic: offsets}, query=group))
            assert answer.status_code == 200, answer.text
        text = wait_for(
            lambda: (
                (t := service.metrics())
                and (metric(t, "sidecar_commits_failed_total", consumergroup=never) or 0) >= 2
                and metric(
                    t, "sidecar_last_successful_commit_timestamp_seconds", consumergroup=recent
                )
                and t
            ),
            timeout=60,
            what="the never-committed group's failures and the other's commit",
        )
    finally:
        service.stop()
    scraped = [
        (parts[sample.labels["consumergroup"]], sample.name, sample.labels)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in read and sample.labels.get("consumergroup") in parts
    ]
    assert {(part, name) for part, name, _ in scraped} == set(NEVER_AND_RECENT), scraped
    input_series = []
    for part, name, labels in scraped:
        fed = {
            **labels,
            "consumergroup": part,
            "namespace": NAMESPACE,
            "job": "sidecar",
            "instance": "a",
        }
        selector = ",".join(f'{k}="{v}"' for k, v in sorted(fed.items()))
        input_series.append(
            {"series": f"{name}{{{selector}}}", "values": NEVER_AND_RECENT[part, name]}
        )
    page = {
        "severity": "critical",
        "namespace": NAMESPACE,
        "consumergroup": "never",
        **{k: v for k, v in scraped[0][2].items() if k == "cluster_name"},
    }
    runbook = f"operate/runbooks/{NO_COMMIT}"
    annotations = {
        "runbook": f"the manual's page {runbook} (docs/{runbook}.md)",
        "summary": f"Group never: {NEVER_SUMMARY}",
        "description": NO_COMMIT_DESCRIPTION,
    }
    checks = [
        # Known for 900 s from 15m; pending for 5m; "recent" never.
        {"eval_time": "14m", "alertname": NO_COMMIT, "exp_alerts": []},
        {"eval_time": "19m", "alertname": NO_COMMIT, "exp_alerts": []},
        {
            "eval_time": "21m",
            "alertname": NO_COMMIT,
            "exp_alerts": [{"exp_labels": page, "exp_annotations": annotations}],
        },
    ]
    run_promtool_cases(
        tmp_path,
        {
            "rule_files": ["rules.yaml"],
            "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": input_series, "alert_rule_test": checks}],
        },
    )


class Prometheus:
    """A real Prometheus scraping one target every second, evaluating ``rules.yaml``."""

    def __init__(self, folder: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(folder / "rules.yaml")],
            "scrape_configs": [
                {
                    "job_name": "sidecar",
                    "static_configs": [{"targets": [target], "labels": {"namespace": NAMESPACE}}],
                }
            ],
        }
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = (folder / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, timeout=60, what="Prometheus to be ready")

    def _ready(self) -> bool:
        assert self.process.poll() is None, "Prometheus exited; see prometheus.log"
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def api(self, path: str, **params: str) -> Any:
        answer = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.close()


@pytest.fixture
def prometheus_and_service(
    tmp_path: Path, kafka_bootstrap: str
) -> Iterator[tuple[Prometheus, ServiceProcess]]:
    # Short windows, so that the test waits seconds, not the production minutes: a bad
    # status alerts after 5 s, any failed commit counts, records waiting 3 s with no commit
    # make a group STOP, 2 failed commits in a row make it ERR, a record unprocessed for
    # 5 s is late, and retention at risk alerts after 5 s.
    rendered_rules(
        tmp_path,
        "--set",
        "metrics.prometheusRule.badStatusFor=5s",
        "--set",
        "metrics.prometheusRule.failuresAbove=0",
        "--set",
        "metrics.prometheusRule.timeLagAboveSeconds=5",
        "--set",
        "metrics.prometheusRule.timeLagFor=5s",
        "--set",
        "metrics.prometheusRule.retentionAtRiskFor=5s",
    )
    service = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        lag_read_interval_seconds=1,
        status_stop_after_seconds=3,
        status_err_after_failures=2,
        export_kafka_lag="true",
        retry_initial_seconds=0.5,
        retry_max_seconds=1,
    ).start()
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{service.port}")
    try:
        yield prometheus, service
    finally:
        prometheus.stop()
        service.stop()


def dashboard_queries() -> list[str]:
    kinds = by_kind(render("--set", "metrics.grafanaDashboard.enabled=true"))
    config = next(c for c in kinds["ConfigMap"] if c["metadata"]["name"].endswith("dashboard"))
    board = json.loads(config["data"]["spark-offset-sidecar.json"])
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def test_a_real_prometheus_alerts_on_a_stopped_and_a_failing_group_not_a_healthy_one(
    prometheus_and_service: tuple[Prometheus, ServiceProcess],
    kafka_bootstrap: str,
    new_topic: Any,
) -> None:
    prometheus, service = prometheus_and_service
    healthy, stopped, failing = three_groups(service, kafka_bootstrap, new_topic(1))
    # Two more groups on a topic of their own: "lost" committed below where DeleteRecords
    # moves the log start, "at_risk" above it (its margin shrinks fast) and catching up.
    topic = new_topic(1)
    run_sync(produce(kafka_bootstrap, topic, 400))
    lost, at_risk = unique_group("lost"), unique_group("at-risk")
    for group, offset in ((lost, 5), (at_risk, 15)):
        answer = service.post_progress(
            group, spark_progress(0, {topic: {"0": offset}}, query=group)
        )
        assert answer.status_code == 200, answer.text

    def log_start() -> Any:
        partitions = service.http.get(f"/v1/status/{at_risk}").json()["partitions"]
        return partitions[0]["log_start_offset"] if partitions else None

    wait_for(
        lambda: log_start() == 0,
        what="a first read of the log start (the history sees it move)",
    )
    run_sync(delete_records(kafka_bootstrap, topic, 0, 10))
    with advancing(service, at_risk, topic, 15):
        check_alerts_and_dashboard(prometheus, service, healthy, stopped, failing, lost, at_risk)


@contextmanager
def advancing(service: ServiceProcess, group: str, topic: str, offset: int) -> Iterator[None]:
    """The group's job reads 4 records a second from ``offset`` (it catches up) until the
    block ends."""
    stop = threading.Event()

    def post() -> None:
        batch, at = 1, offset
        while not stop.wait(0.5):
            at += 2
            service.post_progress(group, spark_progress(batch, {topic: {"0": at}}, query=group))
            batch += 1

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def check_alerts_and_dashboard(
    prometheus: Prometheus,
    service: ServiceProcess,
    healthy: str,
    stopped: str,
    failing: str,
    lost: str,
    at_risk: str,
) -> None:
    seen: list[dict[str, Any]] = []

    def alerts_reached() -> bool:
        alerts = prometheus.alerts()
        seen.extend(alerts)
        states = {
            (a["labels"]["alertname"], a["labels"].get("consumergroup"), a["state"]) for a in alerts
        }
        return {
            ("SparkOffsetSidecarGroupStopped", stopped, "firing"),
            ("SparkOffsetSidecarGroupError", failing, "firing"),
            ("SparkOffsetSidecarCommitFailuresRising", failing, "pending"),
            ("SparkOffsetSidecarTimeLagHigh", stopped, "firing"),
            ("SparkOffsetSidecarDataLost", lost, "firing"),
            ("SparkOffsetSidecarRetentionAtRisk", at_risk, "firing"),
        } <= states

    try:
        wait_for(alerts_reached, timeout=120, what="the alerts")
    except AssertionError as exc:
        states = sorted({(a["labels"]["alertname"], a["state"]) for a in seen})
        raise AssertionError(f"{exc}; seen: {states}") from None
    # The healthy group never alerted, and nothing else did either.
    assert not [a for a in seen if a["labels"].get("consumergroup") == healthy]
    assert {a["labels"]["alertname"] for a in seen} <= {
        "SparkOffsetSidecarGroupStopped",
        "SparkOffsetSidecarGroupError",
        "SparkOffsetSidecarCommitFailuresRising",
        "SparkOffsetSidecarTimeLagHigh",
        "SparkOffsetSidecarDataLost",
        "SparkOffsetSidecarRetentionAtRisk",
    }
    # The data-loss and retention alerts name only the groups they are about.
    assert {
        a["labels"]["consumergroup"]
        for a in seen
        if a["labels"]["alertname"]
        in ("SparkOffsetSidecarDataLost", "SparkOffsetSidecarRetentionAtRisk")
    } == {lost, at_risk}
    status = service.http.get(f"/v1/status/{stopped}").json()
    assert status["status"] == "STOP", status

    # Every query of the dashboard, as Grafana would send it with "All" chosen, returns
    # series (cluster_name=~".*" also matches this one-cluster service's series, which
    # have no cluster_name).
    for query in dashboard_queries():
        expr = query.replace("$consumergroup", ".*").replace("$cluster_name", ".*")
        expr = expr.replace("$__rate_interval", "1m")
        result = wait_for(
            lambda expr=expr: prometheus.api("query", query=expr, time=str(time.time()))["result"],
            timeout=30,
            what=f"series for the dashboard's {expr}",
        )
        assert result, expr
