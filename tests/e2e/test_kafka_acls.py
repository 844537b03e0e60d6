"""The service on a Kafka cluster with ACLs (StandardAuthorizer), as most production
clusters run: with the ACLs the manual lists (docs/secure/kafka.md, "Kafka ACLs") it
commits, reads lag and keeps groups apart by their partition of ``__consumer_offsets``;
without DESCRIBE on that topic it says so once and still commits; a group the principal
may not commit fails as ``not_authorized`` while its neighbours commit."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.kafka_broker import Acl, SecuredBroker, add_acls, brand_new_secured
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

pytestmark = pytest.mark.kafka

USER, PASSWORD = "sidecar", "sidecar-kafka-password-4e1b"
PRINCIPAL = f"User:{USER}"
PREFIX = "spark-"  # the jobs' groups: the ACLs name this prefix only
WARNING = re.compile(r"Kafka does not say how many partitions __consumer_offsets has \((.*?)\)")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    """A brand-new broker with the authorizer on: PLAINTEXT is the super user (tests'
    set-up and reads), the SASL listener's ``sidecar`` has only the ACLs given to it."""
    secured = brand_new_secured(
        tmp_path_factory.mktemp("acl-kafka"), users={USER: PASSWORD}, acls=True
    )
    try:
        yield secured
    finally:
        secured.stop()


def _service(tmp_path: Path, broker: SecuredBroker) -> ServiceProcess:
    tmp_path.mkdir()
    password = tmp_path / "kafka-password"
    password.write_text(PASSWORD)
    return ServiceProcess(
        tmp_path,
        broker.sasl,
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username=USER,
        kafka_sasl_password_file=str(password),
        lag_read_interval_seconds=1,
        commit_timeout_seconds=5,
        retry_initial_seconds=0.5,
    ).start()


def test_the_manuals_acls_commit_read_lag_and_keep_groups_apart(
    tmp_path: Path, acl_broker: SecuredBroker
) -> None:
    topic = unique_group("acl-orders")
    run_sync(create_topics(acl_broker.plain, [topic], 2))
    run_sync(produce(acl_broker.plain, topic, 100))
    # The manual's ACLs, but DESCRIBE on __consumer_offsets held back for now.
    add_acls(
        acl_broker.plain,
        [
            Acl(PRINCIPAL, "GROUP", "PREFIXED", PREFIX, "READ"),
            Acl(PRINCIPAL, "TOPIC", "LITERAL", topic, "READ"),
        ],
    )
    ours, theirs = unique_group(PREFIX + "orders"), unique_group("other-team")
    ends = log_ends(acl_broker.plain, [topic])
    offsets = {str(p): max(0, end - 5) for (_, p), end in ends.items()}
    expected = {(topic, int(p)): o for p, o in offsets.items()}

    # Without DESCRIBE on __consumer_offsets: said once, and commits still go.
    service = _service(tmp_path / "without", acl_broker)
    try:
        for group in (theirs, ours):  # one the ACLs refuse beside one they allow
            answer = service.post_progress(group, spark_progress(1, {topic: offsets}, group))
            assert answer.status_code == 200, answer.text
        wait_for(lambda: committed_offsets(acl_broker.plain, ours) == expected, what="a commit")
        wait_for(
            lambda: (
                (
                    metric(
                        service.metrics(),
                        "sidecar_commits_failed_by_reason_total",
                        consumergroup=theirs,
                        reason="not_authorized",
                    )
                    or 0
                )
                >= 1
            ),
            what="the group outside the ACLs failing as not_authorized",
        )
        assert committed_offsets(acl_broker.plain, theirs) == {}
        status = wait_for(
            lambda: (
                (s := service.http.get(f"/v1/status/{ours}").json())["totallag"] is not None and s
            ),
            what="lag read with READ on the topic",
        )
        assert status["totallag"] == sum(ends.values()) - sum(offsets.values())
        said = WARNING.findall(service.log.read_text())
        assert said == ["TopicAuthorizationFailedError for __consumer_offsets"], said
    finally:
        service.stop()

    # With it, as the manual says: no warning, groups kept apart by partition.
    add_acls(
        acl_broker.plain, [Acl(PRINCIPAL, "TOPIC", "LITERAL", "__consumer_offsets", "DESCRIBE")]
    )
    again = unique_group(PREFIX + "orders")
    service = _service(tmp_path / "with", acl_broker)
    try:
        answer = service.post_progress(again, spark_progress(1, {topic: offsets}, again))
        assert answer.status_code == 200, answer.text
        wait_for(lambda: committed_offsets(acl_broker.plain, again) == expected, what="a commit")
        assert WARNING.findall(service.log.read_text()) == []
    finally:
        service.stop()
