"""SASL/OAUTHBEARER towards a real Kafka broker (the suite's release) whose listener checks
every token's signature against the JWKS of a real issuer started here
(``harness.oidc_issuer``, with Kafka's BrokerJwtValidator: 4.1.0-4.1.1's default one checks
no signature):

- the broker refuses forged, expired and misaddressed tokens, and closes a connection
  whose token has expired (what the service must carry on across);
- the service gets tokens by the client-credentials grant, and with tokens that expire
  every 20 s commits across four expiries: every group's offsets in Kafka equal its last
  completed checkpoint, no commit or log-end read fails, and no secret or token shows in
  the log, /metrics, /readyz or /ui;
- a wrong client secret and a token the broker refuses are reasons on /readyz, /ui and in
  the log, and the service recovers by itself once they are fixed;
- what goes on the wire (a tap in front of the broker): Confluent Cloud's SASL extensions
  and the MSK IAM signer's token reach the broker (which refuses the latter: it is AWS's,
  not a JWT of this issuer).
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka.abc import AbstractTokenProvider
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed
from aiokafka.protocol.admin import ApiVersionRequest

from harness.kafka_broker import LocalBroker, OauthListener, brand_new_secured
from harness.oidc_issuer import OTHER, OidcIssuer, SigningKey
from harness.service_process import ServiceProcess
from harness.wire_tap import WireTap
from spark_offset_sidecar.adapters.kafka.oauth import ClientCredentialsTokens, MskIamTokens
from spark_offset_sidecar.adapters.kafka.wire import refuse_oauth_error_challenge
from tests.support.kafka import committed_offsets, create_topics, run_sync, unique_group
from tests.support.service import metric, metric_sum, spark_progress, wait_for

# The module's broker and issuer are started once: its tests run on one worker.
pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka-oauth")]

CLIENT_SECRET = "oauth-client-secret-5e7a01"
LIFETIME = 20.0  # seconds: every token the issuer hands out (the soak crosses 4 expiries)
SOAK_SECONDS = float(os.environ.get("TEST_OAUTH_SOAK_SECONDS", str(4 * LIFETIME)))
AUDIENCE = "kafka"


@dataclass
class OauthKafka:
    broker: LocalBroker
    oauth: str  # host:port of the OAUTHBEARER listener
    issuer: OidcIssuer

    @property
    def oauth_port(self) -> int:
        return int(self.oauth.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def oauth_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OauthKafka]:
    """A brand-new broker in an empty folder, its OAUTHBEARER listener checking tokens
    against the issuer's JWKS (fetched when the listener starts: the issuer runs first)."""
    issuer = OidcIssuer({"sidecar": CLIENT_SECRET}, lifetime=LIFETIME, audience=AUDIENCE)
    issuer.start()
    try:
        secured = brand_new_secured(
            tmp_path_factory.mktemp("oauth-kafka"),
            oauth=OauthListener(issuer.jwks_url, AUDIENCE, issuer.url),
        )
        try:
            assert secured.oauth is not None
            yield OauthKafka(secured.broker, secured.oauth, issuer)
        finally:
            secured.stop()
    finally:
        issuer.stop()


@pytest.fixture
def issuer(oauth_kafka: OauthKafka) -> Iterator[OidcIssuer]:
    """The module's issuer, as every test finds it and leaves it."""
    running = oauth_kafka.issuer
    yield running
    running.refuse, running.down, running.sign_with = False, False, None


class Static(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token


async def _connect(port: int, provider: AbstractTokenProvider) -> Any:
    refuse_oauth_error_challenge()  # as the service's clients are made (options.py)
    return await create_conn(
        "127.0.0.1",
        port,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
    )


def test_the_broker_checks_signatures_and_closes_connections_whose_token_expired(
    oauth_kafka: OauthKafka, issuer: OidcIssuer
) -> None:
    async def scenario() -> None:
        good = await _connect(oauth_kafka.oauth_port, Static(issuer.mint(sub="sidecar")))
        good.close()
        refused = {
            "unpublished key": issuer.mint(sub="sidecar", key=OTHER),
            "forged signature": issuer.mint(sub="sidecar", key=SigningKey(issuer.key.kid)),
            "another audience": issuer.mint(sub="sidecar", aud="not-kafka"),
            "expired": issuer.mint(sub="sidecar", lifetime=-120),
        }
        for case, token in refused.items():
            with pytest.raises(SaslAuthenticationFailed, match="invalid_token"):
                await _connect(oauth_kafka.oauth_port, Static(token))
            print(f"refused by the broker: {case}")
        short = await _connect(oauth_kafka.oauth_port, Static(issuer.mint(sub="s", lifetime=3)))
        await asyncio.sleep(5)
        with pytest.raises(KafkaConnectionError):
            await short.send(ApiVersionRequest())  # the broker closes it: the token expired

    asyncio.run(scenario())


def _service(tmp_path: Path, kafka: OauthKafka, secret: str, **extra: Any) -> ServiceProcess:
    secret_file = tmp_path / "client-secret"
    secret_file.write_text(secret)
    settings: dict[str, Any] = {
        "kafka_security_protocol": "SASL_PLAINTEXT",
        "kafka_sasl_mechanism": "OAUTHBEARER",
        "kafka_oauth_token_url": kafka.issuer.token_url,
        "kafka_oauth_client_id": "sidecar",
        "kafka_oauth_client_secret_file": str(secret_file),
        "kafka_oauth_audience": AUDIENCE,
        "kafka_oauth_scope": "kafka.commit",
        "kafka_sasl_extensions": "logicalCluster=lkc-test1,identityPoolId=pool-test1",
        "commit_timeout_seconds": 5,
        "retry_initial_seconds": 0.2,
        "retry_max_seconds": 2,
        "lag_read_interval_seconds": 2,
        **extra,
    }
    return ServiceProcess(tmp_path, kafka.oauth, **settings)


def _assert_no_secrets(issuer: OidcIssuer, *texts: str) -> None:
    for text in texts:
        assert CLIENT_SECRET not in text, "the client secret leaked"
        for token in issuer.tokens:
            assert token not in text, "a token leaked"


@pytest.mark.long
def test_commits_carry_on_across_token_expiry_for_minutes(
    tmp_path: Path, oauth_kafka: OauthKafka, issuer: OidcIssuer
) -> None:
    plain = oauth_kafka.broker.bootstrap
    topic = f"oauth-soak-{uuid.uuid4().hex[:6]}"
    run_sync(create_topics(plain, [topic], 2))
    before = issuer.requests["/token"]
    service = _service(tmp_path, oauth_kafka, CLIENT_SECRET).start()
    groups = {unique_group(f"oauth{i}"): str(uuid.uuid4()) for i in range(10)}
    last: dict[str, dict[tuple[str, int], int]] = {}
    try:
        started = time.monotonic()
        batch = 0
        while time.monotonic() - started < SOAK_SECONDS:
            batch += 1
            for group, query in groups.items():
                offsets = {"0": 10 * batch, "1": 10 * batch + 1}
                answer = service.post_progress(
                    group, spark_progress(batch, {topic: offsets}, query)
                )
                assert answer.status_code < 300, answer.text
                last[group] = {(topic, 0): offsets["0"], (topic, 1): offsets["1"]}
            time.sleep(1)
        wait_for(
            lambda: all(committed_offsets(plain, g) == last[g] for g in groups),
            timeout=60,
            what="every group's last checkpoint committed",
        )
        text, processes = service.metrics(), service.processes()
        failed = metric_sum(text, "sidecar_commits_failed_total")
        read_failures = metric(text, "sidecar_log_end_reads_total", result="failed")
        reads = metric(text, "sidecar_log_end_reads_total", result="succeeded")
        resent = metric(text, "sidecar_kafka_requests_resent_total")
        fetched = issuer.requests["/token"] - before
        print(
            f"{SOAK_SECONDS:.0f} s, {batch} batches x {len(groups)} groups, tokens of "
            f"{LIFETIME:.0f} s: {fetched} tokens fetched, {resent:.0f} requests resent after "
            f"the broker closed an expired connection, {failed:.0f} failed commits, "
            f"{read_failures:.0f} of {reads:.0f} log-end reads failed"
        )
        assert failed == 0
        assert read_failures == 0
        assert resent, "connections expired and their requests were sent again"
        # Renewed before expiry (at 80 % of a lifetime), one token for every client of a
        # process (a child watcher reads the log ends with its own).
        assert fetched >= SOAK_SECONDS / LIFETIME
        assert fetched <= processes * (SOAK_SECONDS / (0.8 * LIFETIME) + 3), processes
        readyz = service.http.get("/readyz")
        assert readyz.status_code == 200
        assert readyz.text == "ok\n"
        _assert_no_secrets(
            issuer, text, service.log.read_text(), readyz.text, service.http.get("/ui").text
        )
    finally:
        service.stop()


@pytest.mark.parametrize("case", ["wrong client secret", "token the broker refuses"])
def test_a_refused_identity_is_a_reason_and_the_service_recovers(
    tmp_path: Path, oauth_kafka: OauthKafka, issuer: OidcIssuer, case: str
) -> None:
    plain = oauth_kafka.broker.bootstrap
    topic = f"oauth-refused-{uuid.uuid4().hex[:6]}"
    run_sync(create_topics(plain, [topic], 1))
    if case == "wrong client secret":
        service = _service(tmp_path, oauth_kafka, "not-the-secret-0000")
        said = "Kafka token: the token endpoint answered HTTP 401: invalid_client"
    else:
        issuer.sign_with = OTHER
        service = _service(tmp_path, oauth_kafka, CLIENT_SECRET)
        said = "Kafka: Kafka refused the SASL credentials"
    service.start()
    group = unique_group("refused")
    try:
        service.post_progress(group, spark_progress(1, {topic: {"0": 5}}, str(uuid.uuid4())))
        wait_for(
            lambda: (metric(service.metrics(), "sidecar_commits_failed_by_reason_total",
                            consumergroup=group, reason="authentication_failed") or 0) >= 1,
            what="a failed commit, with its reason",
        )  # fmt: skip
        readyz = wait_for(lambda: (r := service.http.get("/readyz")) and said in r.text and r)
        assert readyz.status_code == 200, "events are still taken"
        # /ui is the watcher's: it learns its service's problems with the next relay.
        wait_for(lambda: said in service.http.get("/ui").text, what="the reason on /ui")
        assert said.split(": ", 1)[1] in service.log.read_text()
        # Fixed: the right secret in the file (read at the next request), or the issuer's
        # own key again; nothing restarted.
        (tmp_path / "client-secret").write_text(CLIENT_SECRET)
        issuer.sign_with = None
        wait_for(
            lambda: committed_offsets(plain, group) == {(topic, 0): 5},
            timeout=60,
            what="committed once the identity is fixed",
        )
        wait_for(lambda: service.http.get("/readyz").text == "ok\n", what="no warning left")
        _assert_no_secrets(issuer, service.metrics(), service.log.read_text())
        assert "not-the-secret-0000" not in service.log.read_text()
    finally:
        service.stop()


def test_oauthbearer_as_one_of_several_clusters_with_its_own_token(
    tmp_path: Path, oauth_kafka: OauthKafka, issuer: OidcIssuer
) -> None:
    """OAUTHBEARER as a cluster of its own (``idp``) beside the same broker's PLAINTEXT
    listener as the default cluster, and ``idp-bad``, the OAuth listener with a wrong
    client secret: each cluster has its own token provider, whose trouble is its own."""
    plain = oauth_kafka.broker.bootstrap
    topic = f"oauth-clusters-{uuid.uuid4().hex[:6]}"
    run_sync(create_topics(plain, [topic], 1))
    good, bad = tmp_path / "good-secret", tmp_path / "bad-secret"
    good.write_text(CLIENT_SECRET)
    bad.write_text("not-the-secret-0000")
    oauth = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "bootstrap_servers": oauth_kafka.oauth,
        "oauth_token_url": issuer.token_url,
        "oauth_client_id": "sidecar",
        "oauth_audience": AUDIENCE,
    }
    clusters = {
        f"cluster_{name}_kafka_{key}": value
        for name in ("idp", "idp_bad")
        for key, value in oauth.items()
    }
    service = ServiceProcess(
        tmp_path,
        plain,
        kafka_clusters="idp,idp-bad",
        **clusters,
        cluster_idp_kafka_oauth_client_secret_file=str(good),
        cluster_idp_bad_kafka_oauth_client_secret_file=str(bad),
        commit_timeout_seconds=5,
        retry_initial_seconds=0.2,
        retry_max_seconds=2,
    ).start()
    groups = {name: unique_group(name) for name in ("default", "idp", "idp-bad")}
    try:
        for batch, (cluster, group) in enumerate(groups.items(), start=1):
            named = {} if cluster == "default" else {"cluster": cluster}
            answer = service.http.post(
                "/v1/progress",
                json={
                    "group_id": group,
                    "progress": spark_progress(batch, {topic: {"0": batch}}, str(uuid.uuid4())),
                    **named,
                },
            )
            assert answer.status_code == 200, answer.text
        wait_for(lambda: committed_offsets(plain, groups["default"]) == {(topic, 0): 1})
        wait_for(lambda: committed_offsets(plain, groups["idp"]) == {(topic, 0): 2})
        said = "Kafka (idp-bad) token: the token endpoint answered HTTP 401: invalid_client"
        ready = wait_for(lambda: (t := service.http.get("/readyz").text) and said in t and t)
        assert "Kafka (idp) token" not in ready, ready
        assert "Kafka (default)" not in ready, ready
        assert committed_offsets(plain, groups["idp-bad"]) == {}
        _assert_no_secrets(issuer, service.metrics(), service.log.read_text())
    finally:
        service.stop()


class _SignedTokensKept(MskIamTokens):
    """The MSK signer, keeping every token it signed."""

    def __init__(self, region: str) -> None:
        super().__init__(region)
        self.signed: list[str] = []

    async def fetch(self) -> tuple[str, float]:
        token, lifetime = await super().fetch()
        self.signed.append(token)
        return token, lifetime


def test_extensions_and_the_msk_iam_token_reach_the_broker(
    oauth_kafka: OauthKafka, issuer: OidcIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a tap in front of the real broker: the bytes of the SASL exchange."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEY000002")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret-key-never-on-the-wire")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    confluent = ClientCredentialsTokens(
        issuer.token_url,
        "sidecar",
        lambda: CLIENT_SECRET,
        audience=AUDIENCE,
        extensions={"logicalCluster": "lkc-abc12", "identityPoolId": "pool-XyZ9"},
    )
    msk = _SignedTokensKept("eu-west-1")

    async def scenario(tap: WireTap) -> Exception:
        accepted = await _connect(tap.port, confluent)
        accepted.close()
        with pytest.raises(SaslAuthenticationFailed) as refused:
            await _connect(tap.port, msk)
        return refused.value

    with WireTap(("127.0.0.1", oauth_kafka.oauth_port)) as tap:
        refusal = asyncio.run(scenario(tap))
        sent = tap.sent()
    # The token signed for that connection (a later one differs: SigV4 signs the second).
    assert len(msk.signed) == 1
    msk_token = msk.signed[0]
    jwt_token = issuer.tokens[-1]
    extensions = "logicalCluster=lkc-abc12\x01identityPoolId=pool-XyZ9"
    assert f"auth=Bearer {jwt_token}\x01{extensions}\x01\x01".encode() in sent
    assert f"auth=Bearer {msk_token}\x01\x01".encode() in sent
    assert "invalid_token" in str(refusal), "the broker read the MSK token (and refused it)"
    signed = base64.urlsafe_b64decode(msk_token + "=" * (-len(msk_token) % 4)).decode()
    assert "Action=kafka-cluster%3AConnect" in signed
    assert b"example-secret-key-never-on-the-wire" not in sent
