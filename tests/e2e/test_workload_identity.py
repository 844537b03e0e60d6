"""Jobs that authenticate with their workload identity: a JWT signed like a Kubernetes
projected service-account token by a real issuer started here (``harness.oidc_issuer``:
JWKS and discovery over HTTP), checked by the real service, Kafka as ground truth.

- A real PySpark job whose Python listener reads its token from a file commits; the
  issuer then rotates its key (the old one unpublished) and the file gets a token of the
  new key, as the kubelet rewrites it: the next run commits too.
- Tokens of another namespace, expired, for another audience, of an unpublished key or
  with a forged signature are refused (403 / 401, each naming why) and move nothing.
- An unreachable issuer is a reason on /readyz and /ui and a 503 for tokens it must check
  (secrets of the tokens file still work); the service recovers when it is back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.oidc_issuer import OTHER, OidcIssuer, SigningKey, service_account_claims
from harness.service_process import ServiceProcess
from spark_offset_listener.listener import OffsetCommitListener
from tests.support.kafka import committed_offsets, create_topics, produce, run_sync, unique_group
from tests.support.service import spark_progress, wait_for
from tests.support.spark_queries import last_end_offsets, run_available_now

pytestmark = pytest.mark.kafka

AUDIENCE = "spark-offset-sidecar"
OPS = "ops-read-token-0123456789"


@pytest.fixture
def issuer() -> Iterator[OidcIssuer]:
    running = OidcIssuer(audience=AUDIENCE, lifetime=3600).start()
    yield running
    running.stop()


def sa_token(issuer: OidcIssuer, namespace: str = "team-a", **kw: Any) -> str:
    return issuer.mint(
        sub=f"system:serviceaccount:{namespace}:spark-driver",
        **service_account_claims(namespace, "spark-driver"),
        **kw,
    )


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def service(tmp_path: Path, kafka_bootstrap: str, issuer: OidcIssuer) -> Iterator[ServiceProcess]:
    running = _service(tmp_path, kafka_bootstrap, issuer)
    yield running
    running.stop()


def _service(tmp_path: Path, kafka_bootstrap: str, issuer: OidcIssuer) -> ServiceProcess:
    grants = {
        "identities": [
            {
                "name": "team-a-jobs",
                "subject": "system:serviceaccount:team-a:*",
                "claims": {"kubernetes.io/namespace": "team-a"},
                "write": ["team-a-*"],
                "read": ["team-a-*"],
            }
        ],
        "tokens": [{"name": "ops", "token": OPS, "read": ["*"], "write": ["ops-*"]}],
    }
    tokens_file = tmp_path / "grants.json"
    tokens_file.write_text(json.dumps(grants))
    return ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        tokens_file=tokens_file,
        oidc_issuer=issuer.url,
        oidc_audience=AUDIENCE,
    ).start()


@pytest.mark.spark
def test_a_spark_job_commits_with_a_token_file_rotated_like_the_kubelet_does(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    issuer: OidcIssuer,
    service: ServiceProcess,
) -> None:
    topic = new_topic(2)
    run_sync(produce(kafka_bootstrap, topic, 200))
    group = unique_group("team-a")
    token_dir = tmp_path / "serviceaccount"
    token_dir.mkdir()
    token_file = token_dir / "token"

    def project(token: str) -> None:  # a new file renamed over the old, atomically
        fresh = token_dir / ".token.new"
        fresh.write_text(token)
        fresh.rename(token_file)

    first_token = sa_token(issuer)
    project(first_token)
    listener = OffsetCommitListener(
        service.url, group_id=group, token_file=str(token_file), flush_timeout=2.0, timeout=2.0
    )
    spark.streams.addListener(listener)
    try:
        first = run_available_now(spark, kafka_bootstrap, [topic], tmp_path / "job")
        ends = last_end_offsets(first)
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, what="first commit")

        issuer.rotate()
        issuer.published = [issuer.key]  # the old key is gone: its tokens verify no more
        second_token = sa_token(issuer)
        project(second_token)
        # The service has the new keys (a token of the new key made it fetch them) and
        # refuses the old token: a listener still sending it would commit nothing.
        wait_for(
            lambda: (
                service.http.get("/v1/queries", headers=_bearer(second_token)).status_code == 200
            ),
            timeout=30,
            what="the new key fetched",
        )
        assert service.http.get("/v1/queries", headers=_bearer(first_token)).status_code == 401
        run_sync(produce(kafka_bootstrap, topic, 100, start=200))
        second = run_available_now(spark, kafka_bootstrap, [topic], tmp_path / "job")
        ends = last_end_offsets(second)
        assert sum(ends.values()) == 300
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, what="second commit")
        assert listener.sender.stats.rejected == 0
    finally:
        spark.streams.removeListener(listener)
        listener.sender.close(0.5)
    log = service.log.read_text()
    for token in issuer.tokens:
        assert token not in log, "a token leaked into the log"


def test_refused_tokens_name_why_and_move_nothing(
    kafka_bootstrap: str, issuer: OidcIssuer, service: ServiceProcess
) -> None:
    topic = f"wi-{uuid.uuid4().hex[:6]}"
    run_sync(create_topics(kafka_bootstrap, [topic], 1))
    cases = {
        "another namespace": (sa_token(issuer, "team-b"), 403, "system:serviceaccount:team-b"),
        "expired": (sa_token(issuer, lifetime=-120), 401, "has expired"),
        "another audience": (sa_token(issuer, aud="kafka"), 401, "not for audience"),
        "an unpublished key": (sa_token(issuer, key=OTHER), 401, "not among issuer"),
        "a forged signature": (
            sa_token(issuer, key=SigningKey(issuer.key.kid)),
            401,
            "signature does not verify",
        ),
    }
    for case, (token, status, reason) in cases.items():
        group = unique_group("team-a")
        answer = service.http.post(
            "/v1/progress",
            json={
                "group_id": group,
                "progress": spark_progress(1, {topic: {"0": 1}}, str(uuid.uuid4())),
            },
            headers=_bearer(token),
        )
        assert answer.status_code == status, (case, answer.text)
        assert reason in answer.json()["detail"], (case, answer.text)
        assert token not in answer.text
        assert committed_offsets(kafka_bootstrap, group) == {}, case
    good = unique_group("team-a")
    answer = service.http.post(
        "/v1/progress",
        json={
            "group_id": good,
            "progress": spark_progress(1, {topic: {"0": 1}}, str(uuid.uuid4())),
        },
        headers=_bearer(sa_token(issuer)),
    )
    assert answer.status_code < 300, answer.text
    wait_for(lambda: committed_offsets(kafka_bootstrap, good) == {(topic, 0): 1}, what="commit")


def test_an_unreachable_issuer_is_a_reason_and_the_service_recovers(
    tmp_path: Path, kafka_bootstrap: str, issuer: OidcIssuer
) -> None:
    issuer.down = True  # from the start: no key was ever had
    running = _service(tmp_path, kafka_bootstrap, issuer)
    try:
        token = sa_token(issuer)
        answer = running.http.get("/v1/queries", headers=_bearer(token))
        assert answer.status_code == 503, answer.text
        assert "cannot check the token: no keys of issuer" in answer.text
        readyz = running.http.get("/readyz")
        assert readyz.status_code == 200, "events with the tokens file's secrets go on"
        assert "warning: jobs' token issuer:" in readyz.text
        assert "HTTP 503" in readyz.text
        page = running.http.get("/ui", headers=_bearer(OPS))
        assert "jobs&#x27; token issuer:" in page.text
        assert "token issuer" in running.log.read_text()
        assert running.http.get("/v1/queries", headers=_bearer(OPS)).status_code == 200
        issuer.down = False
        wait_for(
            lambda: running.http.get("/readyz").text == "ok\n",
            timeout=30,
            what="the issuer's keys had again, with no request asking",
        )
        assert running.http.get("/v1/queries", headers=_bearer(token)).status_code == 200
    finally:
        running.stop()
