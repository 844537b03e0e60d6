"""The OAUTHBEARER token sources against a real HTTP issuer (``harness.oidc_issuer``; no
broker here: tests/e2e/test_kafka_oauth.py puts them on the wire): renewal at 80 % of a
token's life, the secret re-read from its file, every failure named without the secret,
the current token kept while it is valid, and the MSK IAM signer's token."""

from __future__ import annotations

import asyncio
import base64
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.machine import free_port
from harness.oidc_issuer import OidcIssuer
from spark_offset_sidecar.adapters.kafka.oauth import ClientCredentialsTokens, MskIamTokens
from spark_offset_sidecar.errors import TokenUnavailable

SECRET = "client-secret-4b1d9e77"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def issuer() -> Iterator[OidcIssuer]:
    running = OidcIssuer({"sidecar": SECRET}, lifetime=100).start()
    yield running
    running.stop()


def tokens(
    issuer: OidcIssuer, secret_file: Path, clock: Clock, **kw: object
) -> ClientCredentialsTokens:
    return ClientCredentialsTokens(
        issuer.token_url,
        "sidecar",
        lambda: secret_file.read_text().strip(),
        clock=clock,
        **kw,  # type: ignore[arg-type]
    )


def test_a_token_is_kept_and_renewed_at_80_percent_of_its_life(
    issuer: OidcIssuer, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    clock = Clock()
    source = tokens(issuer, secret, clock, scope="kafka", audience="kafka-cluster",
                    extensions={"logicalCluster": "lkc-1"})  # fmt: skip
    first = asyncio.run(source.token())
    clock.now += 79
    assert asyncio.run(source.token()) == first
    assert issuer.requests["/token"] == 1
    clock.now += 2  # 81 s of 100
    asyncio.run(source.token())
    assert issuer.requests["/token"] == 2
    assert issuer.issued[-1]["aud"] == "kafka-cluster"
    assert issuer.issued[-1]["scope"] == "kafka"
    assert source.extensions() == {"logicalCluster": "lkc-1"}
    assert source.problem is None


def test_a_refused_client_is_named_and_recovers_when_the_secret_is_fixed(
    issuer: OidcIssuer, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("wrong-secret-0000")
    source = tokens(issuer, secret, Clock())
    with pytest.raises(TokenUnavailable) as refused:
        asyncio.run(source.token())
    message = str(refused.value)
    assert "HTTP 401" in message
    assert "invalid_client" in message
    assert "'sidecar'" in message
    assert "wrong-secret-0000" not in message
    assert SECRET not in message
    assert source.problem == message
    secret.write_text(SECRET)  # a rotated Secret: read again at the next request
    assert asyncio.run(source.token())
    assert source.problem is None


def test_the_current_token_is_kept_while_the_endpoint_is_down(
    issuer: OidcIssuer, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    clock = Clock()
    source = tokens(issuer, secret, clock)
    first = asyncio.run(source.token())
    issuer.down = True
    clock.now += 90  # due for renewal, still valid
    assert asyncio.run(source.token()) == first
    assert source.problem is not None
    assert "HTTP 503" in source.problem
    clock.now += 11  # expired now
    with pytest.raises(TokenUnavailable, match="HTTP 503"):
        asyncio.run(source.token())
    issuer.down = False
    asyncio.run(source.token())
    assert issuer.requests["/token"] == 4  # the first, two answered 503, this one
    assert source.problem is None


def test_an_unreachable_endpoint_is_named(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    url = f"http://127.0.0.1:{free_port()}/token"
    source = ClientCredentialsTokens(url, "sidecar", lambda: secret.read_text(), timeout=2)
    with pytest.raises(TokenUnavailable, match="cannot reach the token endpoint") as failed:
        asyncio.run(source.token())
    assert url in str(failed.value)


def test_an_unreadable_secret_file_is_named(issuer: OidcIssuer, tmp_path: Path) -> None:
    source = tokens(issuer, tmp_path / "missing", Clock())
    with pytest.raises(TokenUnavailable, match="cannot read the OAuth client secret"):
        asyncio.run(source.token())


def test_msk_iam_signs_a_token_with_the_credentials_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AWS's signer, with credentials from the environment (what IRSA and Pod Identity
    also feed botocore's chain): a presigned kafka-cluster:Connect URL, valid 900 s."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEY000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret-key-never-on-the-wire")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    source = MskIamTokens("eu-west-1")
    token = asyncio.run(source.token())
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert url.startswith("https://kafka.eu-west-1.amazonaws.com/")
    assert query["Action"] == ["kafka-cluster:Connect"]
    assert query["X-Amz-Credential"][0].startswith("AKIAEXAMPLEKEY000001/")
    assert "example-secret-key-never-on-the-wire" not in url
    assert source._expires_at - source._fetched_at == pytest.approx(900, abs=5)


def test_msk_iam_without_credentials_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(TokenUnavailable, match="the MSK IAM signer failed"):
        asyncio.run(MskIamTokens("eu-west-1").token())
