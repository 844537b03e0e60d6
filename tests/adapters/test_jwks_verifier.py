"""Jobs' JWTs checked against a real issuer's JWKS over HTTP (``harness.oidc_issuer``):
what is accepted, every way a token is refused (each named), keys from the discovery
document, rotation, an issuer that is down, and a flood of unknown key ids."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import jwt
import pytest

from harness.oidc_issuer import OTHER, OidcIssuer, SigningKey, service_account_claims
from spark_offset_sidecar.adapters.oidc.jwks_verifier import (
    REFETCH_AFTER,
    TRUSTED_FOR,
    JwksVerifier,
)
from spark_offset_sidecar.errors import IdentityUnavailable, Unauthenticated

AUDIENCE = "spark-offset-sidecar"
SUBJECT = "system:serviceaccount:team-a:orders-etl"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def issuer() -> Iterator[OidcIssuer]:
    running = OidcIssuer(audience=AUDIENCE, lifetime=3600).start()
    yield running
    running.stop()


def verifier(issuer: OidcIssuer, clock: Clock | None = None, **kw: object) -> JwksVerifier:
    return JwksVerifier(issuer.url, AUDIENCE, clock=clock or Clock(), timeout=2, **kw)  # type: ignore[arg-type]


def sa_token(issuer: OidcIssuer, **kw: object) -> str:
    return issuer.mint(sub=SUBJECT, **service_account_claims("team-a", "orders-etl"), **kw)  # type: ignore[arg-type]


def test_a_service_account_token_is_verified_with_keys_from_discovery(issuer: OidcIssuer) -> None:
    checker = verifier(issuer)
    identity = asyncio.run(checker.verify(sa_token(issuer)))
    assert identity.subject == SUBJECT
    assert identity.claims["kubernetes.io"]["namespace"] == "team-a"
    assert issuer.requests["/.well-known/openid-configuration"] == 1
    assert issuer.requests["/jwks"] == 1
    asyncio.run(checker.verify(sa_token(issuer)))
    assert issuer.requests["/jwks"] == 1, "keys are kept"


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("expired", "has expired"),
        ("another audience", "not for audience 'spark-offset-sidecar'"),
        ("another issuer", "not issued by"),
        ("an unpublished key", "is not among issuer"),
        ("a forged signature", "signature does not verify"),
        ("HMAC", "only asymmetric"),
        ("not a JWT", "not a well-formed JWT"),
    ],
)
def test_refusals_name_their_reason(issuer: OidcIssuer, case: str, reason: str) -> None:
    token = {
        "expired": lambda: sa_token(issuer, lifetime=-120),
        "another audience": lambda: sa_token(issuer, aud="kafka"),
        "another issuer": lambda: sa_token(issuer, iss="https://elsewhere.example"),
        "an unpublished key": lambda: sa_token(issuer, key=OTHER),
        "a forged signature": lambda: sa_token(issuer, key=SigningKey(issuer.key.kid)),
        "HMAC": lambda: jwt.encode(
            {"sub": SUBJECT, "aud": AUDIENCE, "iss": issuer.url, "exp": 2**31, "iat": 0},
            "a-shared-secret-of-32-bytes-long!",
            algorithm="HS256",
            headers={"kid": issuer.key.kid},
        ),
        "not a JWT": lambda: "eyJ%%%.not-base64.at-all",
    }[case]()
    with pytest.raises(Unauthenticated, match=reason) as refused:
        asyncio.run(verifier(issuer).verify(token))
    assert token not in str(refused.value)


def test_a_rotated_key_is_fetched_when_a_token_names_it(issuer: OidcIssuer) -> None:
    clock = Clock()
    checker = verifier(issuer, clock, jwks_url=issuer.jwks_url)
    asyncio.run(checker.verify(sa_token(issuer)))
    issuer.rotate()
    clock.now += REFETCH_AFTER
    assert asyncio.run(checker.verify(sa_token(issuer))).subject == SUBJECT
    assert issuer.requests["/jwks"] == 2
    assert issuer.requests["/.well-known/openid-configuration"] == 0


def test_unknown_key_ids_fetch_at_most_once_per_interval(issuer: OidcIssuer) -> None:
    clock = Clock()
    checker = verifier(issuer, clock, jwks_url=issuer.jwks_url)
    asyncio.run(checker.verify(sa_token(issuer)))
    clock.now += REFETCH_AFTER
    for index in range(20):
        with pytest.raises(Unauthenticated):
            asyncio.run(checker.verify(sa_token(issuer, key=SigningKey(f"forged-{index}"))))
    assert issuer.requests["/jwks"] == 2  # the first, and one for the first unknown kid


def test_an_issuer_that_is_down_is_a_503_reason_and_recovers(issuer: OidcIssuer) -> None:
    clock = Clock()
    checker = verifier(issuer, clock)
    issuer.down = True
    asyncio.run(checker.refresh())
    assert checker.problem is not None
    assert "HTTP 503" in checker.problem
    with pytest.raises(IdentityUnavailable, match="no keys of issuer"):
        asyncio.run(checker.verify(sa_token(issuer)))
    issuer.down = False
    clock.now += REFETCH_AFTER
    assert asyncio.run(checker.verify(sa_token(issuer))).subject == SUBJECT
    assert checker.problem is None


def test_keys_once_had_are_kept_while_a_refresh_fails(issuer: OidcIssuer) -> None:
    clock = Clock()
    checker = verifier(issuer, clock, refresh=60)
    asyncio.run(checker.verify(sa_token(issuer)))
    issuer.down = True
    clock.now += 61
    another = sa_token(issuer, jti="another")  # not one already trusted
    assert asyncio.run(checker.verify(another)).subject == SUBJECT
    assert checker.problem is not None


class Wall(Clock):
    def __init__(self) -> None:
        self.now = time.time()  # the tokens' exp are real times


def test_a_verified_token_is_trusted_for_a_minute_and_checked_again_after(
    issuer: OidcIssuer,
) -> None:
    wall = Wall()
    checker = JwksVerifier(issuer.url, AUDIENCE, wall=wall, timeout=2)
    checks = 0
    check = checker._check

    async def counted(token: str) -> object:
        nonlocal checks
        checks += 1
        return await check(token)

    checker._check = counted  # type: ignore[method-assign,assignment]
    token = sa_token(issuer)
    for _ in range(5):
        asyncio.run(checker.verify(token))
    assert checks == 1
    wall.now += TRUSTED_FOR
    asyncio.run(checker.verify(token))
    assert checks == 2


def test_a_key_taken_out_of_the_jwks_stops_its_trusted_tokens_at_the_next_fetch(
    issuer: OidcIssuer,
) -> None:
    clock = Clock()
    checker = verifier(issuer, clock, jwks_url=issuer.jwks_url)
    old = sa_token(issuer)
    asyncio.run(checker.verify(old))  # trusted now
    issuer.rotate()
    issuer.published = [issuer.key]
    clock.now += REFETCH_AFTER
    asyncio.run(checker.verify(sa_token(issuer)))  # an unseen kid: the keys are fetched
    with pytest.raises(Unauthenticated, match="not among issuer"):
        asyncio.run(checker.verify(old))
