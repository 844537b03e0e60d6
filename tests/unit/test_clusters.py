"""Several Kafka clusters: the settings that describe them (each cluster's own, nothing
leaking from another), the choice of a group's cluster, and the ledger's rule R14."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_offset_sidecar.core.clusters import ClusterOf, Clusters, UnknownCluster
from spark_offset_sidecar.core.ledger.changes import Outcome
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import ConfigError
from spark_offset_sidecar.settings import Settings

TP = TopicPartition("orders", 0)


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    password = tmp_path / "eu-password"
    password.write_text("eu-secret")
    return {
        "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": "main-1:9092",
        "SIDECAR_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "SIDECAR_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "SIDECAR_KAFKA_SASL_USERNAME": "main-user",
        "SIDECAR_KAFKA_SASL_PASSWORD": "main-secret",
        "SIDECAR_KAFKA_CLUSTER_NAME": "main",
        "SIDECAR_KAFKA_CLUSTERS": "eu-west, analytics",
        "SIDECAR_KAFKA_CLUSTER_BY_GROUP": "eu-*=eu-west,an-*=analytics",
        "SIDECAR_CLUSTER_EU_WEST_KAFKA_BOOTSTRAP_SERVERS": "eu-1:9096,eu-2:9096",
        "SIDECAR_CLUSTER_EU_WEST_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "SIDECAR_CLUSTER_EU_WEST_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "SIDECAR_CLUSTER_EU_WEST_KAFKA_SASL_USERNAME": "eu-user",
        "SIDECAR_CLUSTER_EU_WEST_KAFKA_SASL_PASSWORD_FILE": str(password),
        "SIDECAR_CLUSTER_ANALYTICS_KAFKA_BOOTSTRAP_SERVERS": "an-1:9092",
        **more,
    }


def test_each_cluster_is_described_by_its_own_settings_and_defaults(tmp_path: Path) -> None:
    settings = Settings.from_env(_env(tmp_path))
    assert settings.clusters.names == ("main", "eu-west", "analytics")
    assert settings.for_cluster("main") is settings.kafka
    assert settings.kafka.sasl_secret() == "main-secret"
    eu = settings.for_cluster("eu-west")
    assert (eu.bootstrap_servers, eu.security_protocol) == ("eu-1:9096,eu-2:9096", "SASL_PLAINTEXT")
    assert (eu.sasl_mechanism, eu.sasl_username) == ("SCRAM-SHA-256", "eu-user")
    assert eu.sasl_secret() == "eu-secret"
    # What a cluster does not set takes its default, never another cluster's value.
    analytics = settings.for_cluster("analytics")
    assert analytics.bootstrap_servers == "an-1:9092"
    assert analytics.security_protocol == "PLAINTEXT"
    assert analytics.sasl_username is None
    assert analytics.sasl_secret() is None
    with pytest.raises(KeyError):
        settings.for_cluster("us")
    # A cluster's secrets stay out of the settings' repr, as the service's own do.
    with_secret = Settings.from_env(
        _env(tmp_path, SIDECAR_CLUSTER_ANALYTICS_KAFKA_SASL_PASSWORD="analytics-secret")
    )
    shown = repr(with_secret) + repr(with_secret.for_cluster("analytics"))
    assert "main-secret" not in shown
    assert "analytics-secret" not in shown


@pytest.mark.parametrize(
    ("more", "variable", "problem"),
    [
        (  # a cluster's own setting, checked as the service's are, named as it was given
            {"SIDECAR_CLUSTER_EU_WEST_KAFKA_SASL_USERNAME": ""},
            "SIDECAR_CLUSTER_EU_WEST_KAFKA_SASL_USERNAME",
            "SASL needs a user name",
        ),
        (
            {"SIDECAR_CLUSTER_EU_WEST_KAFKA_BOOTSTRAP_SERVERS": "eu-1"},
            "SIDECAR_CLUSTER_EU_WEST_KAFKA_BOOTSTRAP_SERVERS",
            "is not host:port",
        ),
        (  # a variable of no cluster the service has
            {"SIDECAR_CLUSTER_US_KAFKA_BOOTSTRAP_SERVERS": "us-1:9092"},
            "SIDECAR_CLUSTER_US_KAFKA_BOOTSTRAP_SERVERS",
            "unknown setting",
        ),
        (  # only Kafka settings are per cluster
            {"SIDECAR_CLUSTER_EU_WEST_PORT": "9000"},
            "SIDECAR_CLUSTER_EU_WEST_PORT",
            "unknown setting",
        ),
        ({"SIDECAR_KAFKA_CLUSTERS": "eu-west,EU"}, "SIDECAR_KAFKA_CLUSTERS", "lowercase"),
        ({"SIDECAR_KAFKA_CLUSTERS": "eu-west,eu-west"}, "SIDECAR_KAFKA_CLUSTERS", "twice"),
        (
            {"SIDECAR_KAFKA_CLUSTERS": "eu-west,analytics,main"},
            "SIDECAR_KAFKA_CLUSTERS",
            "SIDECAR_KAFKA_CLUSTER_NAME already names",
        ),
        (
            {"SIDECAR_KAFKA_CLUSTER_BY_GROUP": "us-*=us"},
            "SIDECAR_KAFKA_CLUSTER_BY_GROUP",
            "no cluster is named 'us'",
        ),
        (
            {"SIDECAR_KAFKA_CLUSTER_BY_GROUP": "us-*"},
            "SIDECAR_KAFKA_CLUSTER_BY_GROUP",
            "pattern=cluster",
        ),
    ],
)
def test_a_bad_cluster_setting_names_its_variable(
    tmp_path: Path, more: dict[str, str], variable: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(_env(tmp_path, **more))
    assert refused.value.variable == variable
    assert problem in refused.value.problem


def test_one_cluster_is_the_settings_of_before(tmp_path: Path) -> None:
    settings = Settings.from_env({"SIDECAR_KAFKA_BOOTSTRAP_SERVERS": "k:9092"})
    assert settings.clusters.names == ("default",)
    assert settings.clusters.choice() == Clusters()
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"SIDECAR_CLUSTER_EU_KAFKA_BOOTSTRAP_SERVERS": "eu:9092"})
    assert refused.value.variable == "SIDECAR_CLUSTER_EU_KAFKA_BOOTSTRAP_SERVERS"


def test_a_groups_cluster_is_named_by_its_job_else_by_pattern_else_the_default() -> None:
    clusters = Clusters(
        "main", ("eu-west", "analytics"), (("eu-*", "eu-west"), ("*-an", "analytics"))
    )
    assert clusters.of("orders") == ClusterOf(None)
    assert clusters.of("eu-orders") == ClusterOf("eu-west")
    assert clusters.of("orders-an") == ClusterOf("analytics")
    assert clusters.of("eu-orders", "main") == ClusterOf(None, named=True)
    assert clusters.of("orders", "analytics") == ClusterOf("analytics", named=True)
    with pytest.raises(UnknownCluster, match="no Kafka cluster is named 'us'"):
        clusters.of("orders", "us")
    assert clusters.name_of(None) == "main"
    assert clusters.name_of("eu-west") == "eu-west"


def _progress(ledger: Ledger, group: str, batch: int, cluster: ClusterOf) -> Outcome:
    decision = ledger.decide_progress("q-" + group, group, "r", batch, {TP: batch}, 1.0, cluster)
    ledger.apply(decision)
    return decision.outcome


def test_r14_a_group_commits_to_one_cluster() -> None:
    ledger = Ledger()
    assert _progress(ledger, "a", 1, ClusterOf("eu", named=True)) is Outcome.ACCEPTED
    assert ledger.groups["a"].cluster == "eu"
    # A job that names no cluster keeps the group's; the settings' choice is for new groups.
    assert _progress(ledger, "a", 2, ClusterOf(None)) is Outcome.ACCEPTED
    assert ledger.groups["a"].cluster == "eu"
    refused = ledger.decide_progress("q-a", "a", "r", 3, {TP: 3}, 1.0, ClusterOf(None, named=True))
    assert refused.outcome is Outcome.CONFLICT
    assert refused.detail == (
        "group 'a' commits to Kafka cluster 'eu', not the default Kafka cluster; a group's "
        "offsets live on one cluster"
    )
    request = ledger.take("a", now=2.0)
    assert request is not None
    assert request.cluster == "eu"  # what the committer routes by
    # A new group takes the settings' choice.
    assert _progress(ledger, "b", 1, ClusterOf("analytics")) is Outcome.ACCEPTED
    assert ledger.groups["b"].cluster == "analytics"
