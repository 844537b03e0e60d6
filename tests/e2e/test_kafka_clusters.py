"""Several Kafka clusters behind one service, on two brand-new brokers with different
security: ``main`` (PLAINTEXT, the SIDECAR_KAFKA_* settings) and ``eu`` (SASL SCRAM, under
SIDECAR_CLUSTER_EU_*), ``eu-tls`` (the second broker's TLS listener, its CA given), and
``denied``: the SASL listener with a wrong password. A
topic of one name on both clusters with different log ends shows that each group's lag
is read from its own cluster; a cluster that refuses credentials, then one that is down,
costs the others nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.kafka_broker import LocalBroker, brand_new, brand_new_secured
from harness.replica_cluster import ReplicaCluster
from harness.service_process import ServiceProcess
from tests.support.kafka import (
    committed_offsets,
    create_topics,
    log_ends,
    produce,
    run_sync,
    unique_group,
)
from tests.support.service import metric, spark_progress, wait_for
from tests.support.tls import make_certificates

# The module's two brokers are started once: its tests run on one worker.
pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka-clusters")]

USER, PASSWORD = "sidecar", "eu-cluster-password-8c2d"
TOPIC = "orders"  # on both clusters: two topics


@dataclass(frozen=True)
class Clusters:
    main: LocalBroker
    eu: LocalBroker
    eu_sasl: str
    eu_tls: str
    ca: Path


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    main = brand_new(tmp_path_factory.mktemp("main-kafka"))
    try:
        certificates = make_certificates(tmp_path_factory.mktemp("eu-certs"))
        eu = brand_new_secured(
            tmp_path_factory.mktemp("eu-kafka"),
            users={USER: PASSWORD},
            ssl_pem=certificates.bundle,
        )
        try:
            assert eu.sasl is not None
            assert eu.ssl is not None
            yield Clusters(main, eu.broker, eu.sasl, eu.ssl, certificates.ca)
        finally:
            eu.stop()
    finally:
        main.stop()


def _settings(tmp_path: Path, clusters: Clusters) -> dict[str, Any]:
    """The service's settings, but main's bootstrap: main, eu, eu-tls and denied."""
    password = tmp_path / "eu-password"
    password.write_text(PASSWORD)
    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": USER,
    }
    return dict(
        kafka_cluster_name="main",
        kafka_clusters="eu,eu-tls,denied",
        kafka_cluster_by_group="eu-*=eu",
        **{f"cluster_eu_kafka_{k}": v for k, v in sasl.items()},
        cluster_eu_kafka_bootstrap_servers=clusters.eu_sasl,
        cluster_eu_kafka_sasl_password_file=str(password),
        **{f"cluster_denied_kafka_{k}": v for k, v in sasl.items()},
        cluster_denied_kafka_bootstrap_servers=clusters.eu_sasl,
        cluster_denied_kafka_sasl_password="not-" + PASSWORD,
        cluster_eu_tls_kafka_bootstrap_servers=clusters.eu_tls,
        cluster_eu_tls_kafka_security_protocol="SSL",
        cluster_eu_tls_kafka_ssl_cafile=str(clusters.ca),
        lag_read_interval_seconds=1,
        commit_timeout_seconds=3,
        retry_initial_seconds=0.2,
        retry_max_seconds=1,
    )


def _service(tmp_path: Path, clusters: Clusters) -> ServiceProcess:
    return ServiceProcess(
        tmp_path, clusters.main.bootstrap, **_settings(tmp_path, clusters)
    ).start()


def _post(
    service: ServiceProcess,
    group: str,
    batch: int,
    offsets: dict[str, int],
    topic: str = TOPIC,
    **kw: str,
) -> int:
    progress = spark_progress(batch, {topic: {str(p): o for p, o in offsets.items()}}, group)
    answer = service.http.post("/v1/progress", json={"group_id": group, "progress": progress, **kw})
    return answer.status_code


def _lag(service: ServiceProcess, group: str) -> int | None:
    return service.http.get(f"/v1/status/{group}").json()["totallag"]


def _failed(service: ServiceProcess, group: str, reason: str) -> float:
    text = service.metrics()
    found = metric(
        text, "sidecar_commits_failed_by_reason_total", consumergroup=group, reason=reason
    )
    return found or 0.0


def _describe(
    service: ServiceProcess, group: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """``offset-sidecar describe-group`` with the service's own settings."""
    return subprocess.run(
        [sys.executable, "-m", "spark_offset_sidecar.cli", "describe-group", group, *options],
        env=service.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _described_on_their_clusters(service: ServiceProcess, main: str, eu: str, by: str) -> None:
    """The CLI reads each group on its own cluster: ``--cluster``, else the service's
    choice (the pattern ``eu-*``, else the default), as the runbooks tell users to run it;
    an unknown cluster is refused naming the service's."""
    for group, options, row in (
        (main, (), f"{main}  {TOPIC}  0          10              30              20"),
        (eu, ("--cluster", "eu"), f"{eu}  {TOPIC}  0          20              70              50"),
        (by, (), f"{by}  {TOPIC}  0          25              70              45"),
    ):
        done = _describe(service, group, *options)
        assert done.returncode == 0, done.stderr
        assert [line.split() for line in done.stdout.splitlines() if line.startswith(group)] == [
            row.split()
        ], done.stdout
    refused = _describe(service, eu, "--cluster", "nowhere")
    assert refused.returncode == 1, refused.stderr
    assert "no Kafka cluster is named 'nowhere'" in refused.stderr
    assert "'main', 'eu'" in refused.stderr


def test_one_service_commits_for_jobs_on_two_clusters_each_failure_its_own(
    tmp_path: Path, clusters: Clusters
) -> None:
    main, eu = clusters.main.bootstrap, clusters.eu.bootstrap
    for bootstrap, records in ((main, 30), (eu, 70)):
        run_sync(create_topics(bootstrap, [TOPIC], 1))
        run_sync(produce(bootstrap, TOPIC, records))
    assert log_ends(main, [TOPIC]) == {(TOPIC, 0): 30}
    assert log_ends(eu, [TOPIC]) == {(TOPIC, 0): 70}
    on_main, named_eu, eu_by_pattern = unique_group("m"), unique_group("n"), unique_group("eu-")
    refused, over_tls = unique_group("d"), unique_group("t")
    service = _service(tmp_path, clusters)
    try:
        assert _post(service, over_tls, 1, {0: 30}, cluster="eu-tls") == 200
        assert _post(service, on_main, 1, {0: 10}) == 200
        assert _post(service, named_eu, 1, {0: 20}, cluster="eu") == 200
        assert _post(service, eu_by_pattern, 1, {0: 25}) == 200
        assert _post(service, refused, 1, {0: 5}, cluster="denied") == 200
        wait_for(lambda: committed_offsets(main, on_main) == {(TOPIC, 0): 10}, what="on main")
        wait_for(lambda: committed_offsets(eu, named_eu) == {(TOPIC, 0): 20}, what="named eu")
        wait_for(
            lambda: committed_offsets(eu, eu_by_pattern) == {(TOPIC, 0): 25}, what="by pattern"
        )
        wait_for(lambda: committed_offsets(eu, over_tls) == {(TOPIC, 0): 30}, what="over TLS")
        # Each on its own cluster only.
        assert committed_offsets(eu, on_main) == {}
        _described_on_their_clusters(service, on_main, named_eu, eu_by_pattern)
        assert committed_offsets(main, named_eu) == committed_offsets(main, eu_by_pattern) == {}
        # Lag from each group's own cluster: the same topic name, two log ends.
        wait_for(lambda: _lag(service, on_main) == 20, what="main's lag: 30 - 10")
        wait_for(lambda: _lag(service, named_eu) == 50, what="eu's lag: 70 - 20")
        assert _lag(service, eu_by_pattern) == 45

        # The list, the page and the series read the clusters' monitors as one (each
        # as of its last evaluation).
        def listed() -> dict[str, tuple[str, int | None]]:
            answer = service.http.get("/v1/status").json()
            return {g["group"]: (g["cluster"], g["totallag"]) for g in answer["groups"]}

        wait_for(
            lambda: {listed().get(on_main), listed().get(named_eu)} == {("main", 20), ("eu", 50)},
            what="both clusters' groups listed with their lag",
        )
        assert "Kafka cluster eu" in service.http.get("/ui").text
        text = service.metrics()
        at_main = {"consumergroup": on_main, "cluster_name": "main", "topic": TOPIC}
        at_eu = {"consumergroup": named_eu, "cluster_name": "eu", "topic": TOPIC}
        assert metric(text, "sidecar_consumergroup_lag", **at_main) == 20
        assert metric(text, "sidecar_consumergroup_lag", **at_eu) == 50
        for cluster in ("main", "eu"):  # each cluster's reads, by name
            at = {"cluster_name": cluster, "result": "succeeded"}
            assert (metric(text, "sidecar_log_end_reads_total", **at) or 0) >= 1, cluster
        # denied's group never committed: nothing of it to read, its series stand at 0.
        denied = {"cluster_name": "denied", "result": "failed"}
        assert metric(text, "sidecar_log_end_reads_total", **denied) == 0
        # Credentials refused on one cluster: its group fails, counted; no other does.
        wait_for(
            lambda: _failed(service, refused, "authentication_failed") >= 2,
            what="the denied cluster's group failing as authentication_failed",
        )
        assert committed_offsets(eu, refused) == {}
        ready = service.http.get("/readyz").text
        assert "warning: Kafka (denied): " in ready, ready
        assert "Kafka (eu)" not in ready, ready
        assert "Kafka (eu-tls)" not in ready, ready
        assert "Kafka (main)" not in ready, ready
        # Commits' durations and resends by the cluster they went to (failed ones too).
        text = service.metrics()
        duration = "sidecar_commit_duration_seconds_count"
        for cluster in ("main", "eu", "denied"):
            assert (metric(text, duration, cluster_name=cluster) or 0) >= 1, cluster
        assert metric(text, duration, cluster_name="eu-tls") is not None, "at 0 from the start"
        for cluster in ("main", "eu", "eu-tls", "denied"):
            resent = metric(text, "sidecar_kafka_requests_resent_total", cluster_name=cluster)
            assert resent is not None, cluster
        # A group stays on its cluster; a cluster the service lacks is named.
        moved = service.http.post(
            "/v1/progress",
            json={
                "group_id": on_main,
                "progress": spark_progress(2, {TOPIC: {"0": 11}}, on_main),
                "cluster": "eu",
            },
        )
        assert moved.status_code == 409, moved.text
        assert "commits to the default Kafka cluster, not Kafka cluster 'eu'" in moved.text
        unknown = service.http.post(
            "/v1/progress",
            json={
                "group_id": unique_group("u"),
                "progress": spark_progress(1, {TOPIC: {"0": 1}}, "q-unknown"),
                "cluster": "us",
            },
        )
        assert unknown.status_code == 422, unknown.text
        assert "no Kafka cluster is named 'us'" in unknown.text

        # The eu cluster goes down: main's group keeps committing, eu's wait.
        clusters.eu.stop()
        took = []
        for batch in range(2, 6):
            posted = time.monotonic()
            assert _post(service, on_main, batch, {0: 10 + batch}) == 200
            assert _post(service, named_eu, batch, {0: 20 + batch}, cluster="eu") == 200
            wait_for(
                lambda b=batch: committed_offsets(main, on_main) == {(TOPIC, 0): 10 + b},
                what=f"main's batch {batch} committed while eu is down",
            )
            took.append(time.monotonic() - posted)
        print(
            "\nwith eu's broker stopped, main's checkpoints were in Kafka within "
            + ", ".join(f"{s:.2f} s" for s in took)
            + " of their post (read back every 0.1 s or so)"
        )
        assert sum(_failed(service, on_main, r) for r in ("broker_unavailable", "timeout")) == 0
        wait_for(
            lambda: "Kafka (eu)" in service.http.get("/readyz").text,
            what="/readyz naming the eu cluster",
        )
        clusters.eu.start()
        wait_for(
            lambda: committed_offsets(eu, named_eu) == {(TOPIC, 0): 25},
            timeout=60,
            what="eu's newest checkpoint once it is back",
        )
    finally:
        service.stop()


def test_replicas_commit_each_group_on_its_cluster_and_agree_on_its_status(
    tmp_path: Path, clusters: Clusters, postgres_server: Any
) -> None:
    """Two replicas on one PostgreSQL, each with both clusters: whichever replica takes a
    group's events, it is committed on its own cluster, and every replica answers its
    status (from the board its owner publishes to) with its cluster and its lag."""
    main, eu, topic = clusters.main.bootstrap, clusters.eu.bootstrap, "payments"
    for bootstrap, records in ((main, 40), (eu, 90)):
        run_sync(create_topics(bootstrap, [topic], 1))
        run_sync(produce(bootstrap, topic, records))
    postgres_server.reset()
    settings = {
        **_settings(tmp_path, clusters),
        "commit_timeout_seconds": 1,
        "lease_seconds": 3,
    }
    replicas = ReplicaCluster(tmp_path, main, postgres_server.url, 2, **settings).start()
    on_main, on_eu = unique_group("rm"), unique_group("re")
    try:
        first, second = replicas.replicas.values()
        assert _post(first, on_main, 1, {0: 15}, topic) == 200
        assert _post(second, on_eu, 1, {0: 35}, topic, cluster="eu") == 200
        wait_for(lambda: committed_offsets(main, on_main) == {(topic, 0): 15}, what="on main")
        wait_for(lambda: committed_offsets(eu, on_eu) == {(topic, 0): 35}, what="on eu")
        assert committed_offsets(eu, on_main) == committed_offsets(main, on_eu) == {}
        for replica in (first, second):
            for group, expected in ((on_main, ("main", 25)), (on_eu, ("eu", 55))):
                wait_for(
                    lambda r=replica, g=group, e=expected: _cluster_and_lag(r, g) == e,
                    timeout=30,
                    what=f"{group}'s published status on every replica",
                )
    finally:
        replicas.stop()


def _cluster_and_lag(replica: ServiceProcess, group: str) -> tuple[str, int] | None:
    answer = replica.http.get(f"/v1/status/{group}")
    if answer.status_code != 200:
        return None
    status = answer.json()
    return status["cluster"], status["totallag"]
