"""Security on real components: tokens and limits on the HTTP side (the service over
HTTPS, the listener verifying it), SASL and TLS towards a real broker with SCRAM and TLS
listeners, and no secret in any log line or metric."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.kafka_broker import SecuredBroker, brand_new_secured
from harness.service_process import ServiceProcess
from spark_offset_listener.sender import ProgressSender
from tests.support.kafka import committed_offsets, create_topics, run_sync, unique_group
from tests.support.service import QUERY, metric, spark_progress, wait_for
from tests.support.tls import CertificateSet, make_certificates

# The module's certificates and SASL/TLS broker are made once: its tests run on one worker.
pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka-security")]

ETL = "etl-secret-token-7f3a9c1d2e"
STRANGER = "stranger-secret-token-0b8e77"
READER = "reader-secret-token-5d2c4e91"
KAFKA_PASSWORD = "alice-kafka-password-19d8"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def tokens_file(tmp_path: Path, new_topic: Callable[..., str]) -> tuple[Path, str]:
    topic = new_topic(2)
    document = {
        "tokens": [
            {"name": "etl", "token": ETL, "write": ["etl-*"], "topics": [topic],
             "events_per_second": 5},
            {"name": "stranger", "token": STRANGER, "write": ["other-*"]},
            {"name": "reader", "token": READER, "read": ["*"]},
        ]
    }  # fmt: skip
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(document))
    return path, topic


def _assert_no_secrets(*texts: str) -> None:
    for text in texts:
        for secret in (ETL, STRANGER, READER, KAFKA_PASSWORD):
            assert secret not in text, "a secret leaked into logs or metrics"


def test_tokens_limits_and_tls_to_the_service(
    tmp_path: Path,
    kafka_bootstrap: str,
    tokens_file: tuple[Path, str],
    certificates: CertificateSet,
) -> None:
    path, topic = tokens_file
    service = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        tokens_file=path,
        tls_certfile=certificates.cert,
        tls_keyfile=certificates.key,
        test_ca=certificates.ca,
        max_body_bytes=4096,
        max_partitions_per_event=4,
    ).start()
    group = f"etl-{unique_group()}"

    def post(token: str | None, body: Any = None, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return service.http.post("/v1/progress", json=body, headers=headers, **kw)

    def event(batch: int, offsets: dict[str, dict[str, int]], grp: str = group) -> Any:
        return {"group_id": grp, "progress": spark_progress(batch, offsets)}

    try:
        # The listener verifies the service's certificate and sends its token.
        trusting = ProgressSender(service.url, token=ETL, ssl_context=_context(certificates.ca))
        trusting.offer(QUERY, group, json.dumps(spark_progress(1, {topic: {"0": 10, "1": 11}})))
        assert trusting.flush(10)
        assert trusting.stats.delivered == 1
        want = {(topic, 0): 10, (topic, 1): 11}
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == want, what="commit")
        untrusting = ProgressSender(service.url, token=ETL, timeout=2)  # system CAs only
        untrusting.offer(QUERY, group, json.dumps(spark_progress(2, {topic: {"0": 20}})))
        assert not untrusting.flush(2)
        assert "CERTIFICATE_VERIFY_FAILED" in (untrusting.stats.last_error or "")
        untrusting.close(0)

        answers = {
            "no token": post(None, event(3, {topic: {"0": 30}})),
            "unknown token": post("not-a-token-of-ours-at-all", event(3, {topic: {"0": 30}})),
            "other group": post(STRANGER, event(3, {topic: {"0": 30}})),
            "group outside grant": post(ETL, event(3, {topic: {"0": 30}}, grp="payments")),
            "topic outside grant": post(ETL, event(3, {"payments": {"0": 30}})),
            "too large": post(ETL, content=b'{"x":"' + b"a" * 5000 + b'"}'),
            "too many partitions": post(ETL, event(3, {topic: {str(p): 1 for p in range(5)}})),
            "name too long": post(ETL, event(3, {topic: {"0": 30}}, grp="etl-" + "x" * 300)),
        }
        codes = {name: answer.status_code for name, answer in answers.items()}
        assert codes == {
            "no token": 401,
            "unknown token": 401,
            "other group": 403,
            "group outside grant": 403,
            "topic outside grant": 403,
            "too large": 413,
            "too many partitions": 422,
            "name too long": 422,
        }
        assert answers["no token"].headers["www-authenticate"] == "Bearer"
        assert "SIDECAR_MAX_PARTITIONS_PER_EVENT" in answers["too many partitions"].text

        # Reads: a token with read sees what its groups allow; others do not.
        assert service.http.get("/v1/queries").status_code == 401
        etl_read = service.http.get("/v1/queries", headers={"Authorization": f"Bearer {ETL}"})
        assert etl_read.status_code == 403
        reader = service.http.get("/v1/queries", headers={"Authorization": f"Bearer {READER}"})
        assert [q["group_id"] for q in reader.json()] == [group]

        # Rate: 5 events/s with a burst of 10; stale replays still count.
        statuses = [post(ETL, event(1, {topic: {"0": 10}})).status_code for _ in range(25)]
        assert 429 in statuses
        limited = post(ETL, event(1, {topic: {"0": 10}}))
        if limited.status_code == 429:
            assert int(limited.headers["retry-after"]) >= 1

        assert committed_offsets(kafka_bootstrap, group) == want, "refused requests changed nothing"
        text = service.metrics()
        for reason in ("unauthenticated", "forbidden", "rate_limited", "too_large"):
            assert (metric(text, "sidecar_events_invalid_total", reason=reason) or 0) >= 1
        _assert_no_secrets(text, service.log.read_text())
    finally:
        service.stop()


def _context(cafile: Path) -> Any:
    import ssl

    return ssl.create_default_context(cafile=str(cafile))


def test_refuses_to_listen_beyond_loopback_without_tokens() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "spark_offset_sidecar.cli", "serve"],
        env={"SIDECAR_HOST": "0.0.0.0", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "SIDECAR_HOST" in refused.stderr
    assert "SIDECAR_ALLOW_UNAUTHENTICATED" in refused.stderr


@pytest.fixture(scope="module")
def secure_broker(
    tmp_path_factory: pytest.TempPathFactory, certificates: CertificateSet
) -> Iterator[SecuredBroker]:
    secured = brand_new_secured(
        tmp_path_factory.mktemp("secure-kafka"),
        users={"alice": KAFKA_PASSWORD},
        ssl_pem=certificates.bundle,
    )
    try:
        yield secured
    finally:
        secured.stop()


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("scram-256", {"kafka_security_protocol": "SASL_PLAINTEXT",
                       "kafka_sasl_mechanism": "SCRAM-SHA-256"}),
        ("scram-512", {"kafka_security_protocol": "SASL_PLAINTEXT",
                       "kafka_sasl_mechanism": "SCRAM-SHA-512"}),
        ("plain", {"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_mechanism": "PLAIN"}),
        ("tls", {"kafka_security_protocol": "SSL"}),
    ],
)  # fmt: skip
def test_commits_over_sasl_and_tls(
    tmp_path: Path,
    secure_broker: SecuredBroker,
    certificates: CertificateSet,
    name: str,
    settings: dict[str, str],
) -> None:
    plain = secure_broker.broker.bootstrap
    topic, group = f"secure-{name}", unique_group(name)
    run_sync(create_topics(plain, [topic], 2))
    if settings["kafka_security_protocol"] == "SSL":
        extra = {"kafka_ssl_cafile": str(certificates.ca)}
        bootstrap = secure_broker.ssl
    else:
        password = tmp_path / "kafka-password"
        password.write_text(KAFKA_PASSWORD)
        extra = {"kafka_sasl_username": "alice", "kafka_sasl_password_file": str(password)}
        bootstrap = secure_broker.sasl
    service = ServiceProcess(tmp_path, bootstrap, **settings, **extra).start()
    try:
        service.post_progress(group, spark_progress(3, {topic: {"0": 30, "1": 31}}))
        wait_for(
            lambda: committed_offsets(plain, group) == {(topic, 0): 30, (topic, 1): 31},
            what=f"commit over {name}",
        )
        _assert_no_secrets(service.metrics(), service.log.read_text())
    finally:
        service.stop()


@pytest.mark.parametrize("case", ["wrong password", "untrusted certificate"])
def test_wrong_credentials_are_a_counted_failure_not_a_crash_loop(
    tmp_path: Path, secure_broker: SecuredBroker, case: str
) -> None:
    if case == "wrong password":
        service = ServiceProcess(
            tmp_path,
            secure_broker.sasl,
            kafka_security_protocol="SASL_PLAINTEXT",
            kafka_sasl_mechanism="SCRAM-SHA-256",
            kafka_sasl_username="alice",
            kafka_sasl_password="not-" + KAFKA_PASSWORD,
            commit_timeout_seconds=3,
            retry_initial_seconds=0.2,
        )
        reason = "authentication_failed"
    else:
        service = ServiceProcess(  # the test CA is not given: the broker is not trusted
            tmp_path,
            secure_broker.ssl,
            kafka_security_protocol="SSL",
            commit_timeout_seconds=3,
            retry_initial_seconds=0.2,
        )
        reason = "tls_failed"
    service.start()
    group = unique_group("denied")
    try:
        service.post_progress(group, spark_progress(1, {"t": {"0": 1}}))
        wait_for(
            lambda: (metric(service.metrics(), "sidecar_commits_failed_by_reason_total",
                            consumergroup=group, reason=reason) or 0) >= 2,
            what="failures counted",
        )  # fmt: skip
        assert service.http.get("/livez").status_code == 200
        assert service.process is not None
        assert service.process.poll() is None, "still running"
        assert service.query(QUERY)["last_failure"] == reason
        _assert_no_secrets(service.metrics(), service.log.read_text())
    finally:
        service.stop()
