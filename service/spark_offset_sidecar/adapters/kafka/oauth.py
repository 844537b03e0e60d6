"""Tokens for SASL/OAUTHBEARER: aiokafka's ``AbstractTokenProvider``, fed by an OAuth 2
token endpoint (client credentials, as KIP-768) or by AWS's MSK IAM signer (the ``msk-iam``
extra). How tokens live: docs/secure/kafka.md.

aiokafka asks for a token each time it opens a connection and never again on it (no
KIP-368 re-authentication), so a token is renewed at 80 % of its lifetime and a new
connection never carries one about to expire. A failed renewal while the current token
is valid hands out the current one and keeps the failure in ``problem`` (logged once per
change); without a valid token, ``token()`` raises ``TokenUnavailable`` naming the cause,
never the secret. A token the broker refuses is forgotten (``forget``, called by
``wire.RefusingOAuthAuthenticator``): the next connection asks for a new one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from aiokafka.abc import AbstractTokenProvider

from spark_offset_sidecar.adapters.http_client import fetch
from spark_offset_sidecar.errors import TokenUnavailable, shown

log = logging.getLogger(__name__)

REFRESH_AT = 0.8  # of a token's lifetime: KIP-768's sasl.login.refresh.window.factor
UNKNOWN_LIFETIME = 60.0  # seconds, for a token that says nothing of its expiry
MIN_LIFETIME = 1.0


class RenewedTokens(AbstractTokenProvider):
    """A token kept and renewed before it expires; ``fetch`` gets a new one."""

    def __init__(
        self,
        extensions: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._extensions = dict(extensions or {})
        self._clock = clock
        self._token: str | None = None
        self._fetched_at = 0.0
        self._expires_at = 0.0
        self._lock = asyncio.Lock()
        self.problem: str | None = None

    async def token(self) -> str:
        async with self._lock:
            now = self._clock()
            if self._token is not None and now < self._renew_at():
                return self._token
            try:
                token, lifetime = await self.fetch()
            except TokenUnavailable as exc:
                self._failed(str(exc))
                if self._token is not None and self._clock() < self._expires_at:
                    return self._token
                raise
            now = self._clock()
            self._token = token
            self._fetched_at = now
            self._expires_at = now + max(MIN_LIFETIME, lifetime)
            if self.problem is not None:
                log.info("Kafka token: had one again (%s)", self.describe())
                self.problem = None
            return token

    def forget(self, why: str) -> None:
        """The broker refused the current token: the next connection asks for a new one."""
        self._token = None
        self._failed(why)

    def extensions(self) -> dict[str, str]:
        """SASL extensions sent with every token (e.g. Confluent Cloud's logicalCluster)."""
        return dict(self._extensions)

    async def fetch(self) -> tuple[str, float]:
        """A new token and its lifetime in seconds; ``TokenUnavailable`` when none."""
        raise NotImplementedError

    def describe(self) -> str:
        """Where tokens come from, for logs (no secret)."""
        raise NotImplementedError

    def _renew_at(self) -> float:
        return self._fetched_at + REFRESH_AT * (self._expires_at - self._fetched_at)

    def _failed(self, problem: str) -> None:
        if problem != self.problem:
            log.warning("Kafka token: %s", problem)
        self.problem = problem


class ClientCredentialsTokens(RenewedTokens):
    """OAuth 2 client credentials (RFC 6749 4.4) at ``token_url``: the client id and secret
    in HTTP Basic, ``scope`` and ``audience`` (Auth0's, Okta's, Keycloak's name for the
    resource) in the form when given."""

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: Callable[[], str],
        *,
        scope: str | None = None,
        audience: str | None = None,
        timeout: float = 10.0,
        extensions: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(extensions, clock)
        self.token_url = token_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self.audience = audience
        self.timeout = timeout

    def describe(self) -> str:
        return f"client {self.client_id!r} at {self.token_url}"

    async def fetch(self) -> tuple[str, float]:
        try:
            secret = self._client_secret()
        except OSError as exc:
            raise TokenUnavailable(
                f"cannot read the OAuth client secret for {self.describe()}: {exc.strerror}"
            ) from None
        return await asyncio.to_thread(self._request, secret)

    def _request(self, secret: str) -> tuple[str, float]:
        asked = {"grant_type": "client_credentials", "scope": self.scope, "audience": self.audience}
        form = {name: value for name, value in asked.items() if value}  # those given
        try:
            status, body = fetch(
                "POST",
                self.token_url,
                timeout=self.timeout,
                limit=1 << 20,
                form=form,
                auth=(self.client_id, secret),  # HTTP Basic
                headers={"Accept": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise TokenUnavailable(
                f"cannot reach the token endpoint {self.token_url}: {exc}"
            ) from None
        if not httpx.codes.is_success(status):
            raise TokenUnavailable(
                f"the token endpoint answered HTTP {status}{_oauth_error(body)} to "
                f"{self.describe()}"
            )
        return _access_token(body, self.token_url, self._clock())


class MskIamTokens(RenewedTokens):
    """Amazon MSK's IAM access control: a token signed with the AWS credentials found in
    AWS's usual places (environment, web identity of IRSA, EKS Pod Identity, instance
    profile), or with a role assumed from them when ``role_arn`` is given."""

    def __init__(
        self,
        region: str,
        role_arn: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(None, clock)
        self.region = region
        self.role_arn = role_arn

    def describe(self) -> str:
        role = f", role {self.role_arn}" if self.role_arn else ""
        return f"MSK IAM in {self.region}{role}"

    async def fetch(self) -> tuple[str, float]:
        return await asyncio.to_thread(self._sign)

    def _sign(self) -> tuple[str, float]:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider  # the msk-iam extra

        try:
            if self.role_arn:
                token, expiry_ms = MSKAuthTokenProvider.generate_auth_token_from_role_arn(
                    self.region, self.role_arn
                )
            else:
                token, expiry_ms = MSKAuthTokenProvider.generate_auth_token(self.region)
        except Exception as exc:  # botocore's errors: no credentials, STS refused, ...
            raise TokenUnavailable(
                f"the MSK IAM signer failed ({self.describe()}): {type(exc).__name__}: "
                f"{shown(str(exc))[:300]}"
            ) from None
        return str(token), int(expiry_ms) / 1000 - self._clock()


def _oauth_error(body: bytes) -> str:
    """``: invalid_client (Client authentication failed)`` from an RFC 6749 error answer."""
    try:
        document = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(document, dict) or not isinstance(document.get("error"), str):
        return ""
    text = f": {document['error']}"
    description = document.get("error_description")
    if isinstance(description, str) and description:
        text += f" ({description[:200]})"
    return shown(text)


def _access_token(body: bytes, url: str, now: float) -> tuple[str, float]:
    try:
        document = json.loads(body)
    except ValueError:
        raise TokenUnavailable(f"the token endpoint {url} did not answer JSON") from None
    token = document.get("access_token") if isinstance(document, dict) else None
    if not isinstance(token, str) or not token:
        raise TokenUnavailable(f"the token endpoint {url} answered without an access_token")
    expires_in = document.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
        return token, float(expires_in)
    expiry = _jwt_expiry(token)
    return token, (expiry - now) if expiry is not None else UNKNOWN_LIFETIME


def _jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT, read without checking it (only to plan the renewal)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims: Any = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
