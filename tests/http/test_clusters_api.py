"""Several Kafka clusters in the running app (in-process, doubles for Kafka): each commit
carries its group's cluster to the committer, and the group's cluster shows in its status,
its query's state, its followed folder, the page and, as ``cluster_name``, every per-group
series. The same against two real brokers is ``tests/e2e/test_kafka_clusters.py``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.testing import InMemoryCommitter, InMemoryLogEnds, MemoryKafka
from tests.support.app import doubles, settings_for
from tests.support.service import metric, spark_progress, wait_for


def _post(client: TestClient, group: str, cluster: str | None = None) -> int:
    body = {"group_id": group, "progress": spark_progress(1, {"orders": {"0": 5}}, f"q-{group}")}
    if cluster is not None:
        body["cluster"] = cluster
    return client.post("/v1/progress", json=body).status_code


def test_a_groups_cluster_reaches_the_committer_and_every_view(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path,
        kafka_cluster_name="main",
        kafka_clusters="eu",
        cluster_eu_kafka_bootstrap_servers="eu-1:9092",
        kafka_cluster_by_group="eu-*=eu",
        lag_read_interval_seconds=0.05,
        metrics_max_age_seconds=0,  # every scrape a fresh build
    )
    committer = InMemoryCommitter()
    ends = InMemoryLogEnds({TopicPartition("orders", 0): 9})
    app = create_app(settings, doubles(settings, MemoryKafka(committer=committer, log_ends=ends)))
    with TestClient(app) as client:
        before = client.get("/metrics").text  # each cluster's commit durations at 0
        for cluster in ("main", "eu"):
            assert (
                metric(before, "sidecar_commit_duration_seconds_count", cluster_name=cluster) == 0
            )
        assert _post(client, "orders") == 200
        assert _post(client, "payments", cluster="eu") == 200
        assert _post(client, "eu-clicks") == 200
        wait_for(lambda: len(committer.commits) == 3, what="three commits")
        assert {r.group_id: r.cluster for r in committer.commits} == {
            "orders": None,  # the default cluster, as the ledger keeps it
            "payments": "eu",
            "eu-clicks": "eu",
        }
        status = {
            g: client.get(f"/v1/status/{g}").json()["cluster"] for g in ("orders", "payments")
        }
        assert status == {"orders": "main", "payments": "eu"}
        queries = {q["group_id"]: q["cluster"] for q in client.get("/v1/queries").json()}
        assert queries == {"orders": "main", "payments": "eu", "eu-clicks": "eu"}
        labels = {"orders": "main", "payments": "eu", "eu-clicks": "eu"}
        succeeded = "sidecar_commits_succeeded_total"
        text = wait_for(  # the counters come with the memory the watcher is told (a second)
            lambda: (
                (t := client.get("/metrics").text)
                and all(
                    metric(t, succeeded, consumergroup=g, cluster_name=c) == 1
                    for g, c in labels.items()
                )
                and t
            ),
            what="every group's counters",
        )
        at_main = {"cluster_name": "main", "result": "failed"}  # one reader given: main's
        assert metric(text, "sidecar_log_end_reads_total", **at_main) == 0
        for group, cluster in labels.items():
            at = {"consumergroup": group, "cluster_name": cluster}
            assert metric(text, succeeded, **at) == 1, group
            assert metric(text, "sidecar_commits_failed_total", **at) == 0, group
        # Commits' durations by the cluster they went to: 1 to main, 2 to eu.
        duration = "sidecar_commit_duration_seconds_count"
        assert metric(text, duration, cluster_name="main") == 1
        assert metric(text, duration, cluster_name="eu") == 2
        page = wait_for(
            lambda: (t := client.get("/ui").text) and "Kafka cluster eu" in t and t,
            what="the page naming the cluster",
        )
        assert "Kafka cluster main" not in page  # the default one goes unsaid
        followed = client.post(
            "/v1/followed-folders",
            json={"path": str(tmp_path / "ckpt"), "group_id": "clicks", "cluster": "eu"},
        )
        assert followed.status_code == 201, followed.text
        assert followed.json()["cluster"] == "eu"
        unknown = client.post(
            "/v1/followed-folders",
            json={"path": str(tmp_path / "other"), "group_id": "other", "cluster": "us"},
        )
        assert unknown.status_code == 422, unknown.text
        assert "no Kafka cluster is named 'us'" in unknown.text


def test_with_one_cluster_the_series_have_no_cluster_label(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    app = create_app(settings, doubles(settings))
    with TestClient(app) as client:
        assert _post(client, "orders") == 200
        text = wait_for(
            lambda: (
                (t := client.get("/metrics").text) and "sidecar_commits_succeeded_total{" in t and t
            ),
            what="the group's series",
        )
        assert "cluster_name=" not in text
        assert metric(text, "sidecar_log_end_reads_total", result="failed") == 0
        assert metric(text, "sidecar_commit_duration_seconds_count") == 1
        assert metric(text, "sidecar_kafka_requests_resent_total") == 0
        assert client.get("/v1/status/orders").json()["cluster"] == "default"


def test_a_cluster_dropped_from_the_settings_is_said_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before = settings_for(
        tmp_path, kafka_clusters="eu", cluster_eu_kafka_bootstrap_servers="eu-1:9092"
    )
    with TestClient(create_app(before, doubles(before))) as client:
        assert _post(client, "payments", cluster="eu") == 200
        assert _post(client, "orders") == 200
    caplog.set_level(logging.WARNING, logger="spark_offset_sidecar.app")
    after = settings_for(tmp_path)  # eu is no longer named
    with TestClient(create_app(after, doubles(after))) as client:
        assert client.get("/v1/status/payments").json()["cluster"] == "eu"
    said = [r.getMessage() for r in caplog.records if "do not name" in r.getMessage()]
    assert said == [
        "groups on Kafka clusters the settings do not name: 'eu' (1 groups); their commits "
        "fail until SIDECAR_KAFKA_CLUSTERS names them again"
    ]
