"""Jobs' JWTs checked against their issuer's keys: PyJWT's implementation of the
``TokenVerifier`` port (``ports.identity``). PyJWT comes with the ``oidc`` extra and is
imported only here, only when the settings name an issuer. What is checked:
docs/secure/workload-identity.md.

- Keys are fetched in a worker thread, never on the event loop: when first needed, once
  ``refresh`` seconds old, and for an unknown key id at most once per ``REFETCH_AFTER``
  seconds (a flood of forged key ids costs the issuer nothing). Concurrent requests share
  one fetch; keys once had are kept while a refresh fails.
- Only asymmetric signatures: ``none`` and HMAC are refused whatever key they name.
- A refusal (``Unauthenticated``) never quotes the token; no key to check with is
  ``IdentityUnavailable`` (503, retried).
- Checking a signature costs ~0.15-0.3 ms of the event loop and a driver sends the same
  token for an hour, so a verified token is trusted for ``TRUSTED_FOR`` seconds (never
  past its ``exp``); a fetch that changes the keys forgets them all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jwt

from spark_offset_sidecar.adapters.http_client import fetch
from spark_offset_sidecar.errors import IdentityUnavailable, Unauthenticated, shown
from spark_offset_sidecar.ports.identity import VerifiedIdentity

log = logging.getLogger(__name__)

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
LEEWAY = 30.0  # seconds of clock skew allowed on exp, nbf and iat
REFETCH_AFTER = 10.0  # seconds: the least time between two fetches for an unknown key id
MAX_DOCUMENT = 1 << 20
TRUSTED_FOR = 60.0  # seconds a verified token is trusted without checking it again
TRUSTED_TOKENS = 10_000


class JwksVerifier:
    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        jwks_url: str | None = None,
        ca_file: str | Path | None = None,
        bearer_file: str | Path | None = None,
        refresh: float = 300.0,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.jwks_url = jwks_url
        self.ca_file = ca_file
        self.bearer_file = bearer_file
        self.refresh_after = refresh
        self.timeout = timeout
        self._clock = clock
        self._wall = wall
        self._keys: dict[str | None, Any] = {}  # kid -> PyJWK (None: a key without a kid)
        # token -> (trusted until, its identity), oldest first
        self._trusted: OrderedDict[str, tuple[float, VerifiedIdentity]] = OrderedDict()
        self._published = ""  # the last JWKS's keys, as text
        self._fetched_at: float | None = None  # last successful fetch
        self._tried_at: float | None = None  # last attempt, failed or not
        self._lock = asyncio.Lock()
        self.problem: str | None = None

    def looks_like_its_token(self, token: str) -> bool:
        return token.startswith("eyJ") and token.count(".") == 2

    async def refresh(self) -> None:
        """Fetch the keys now (at start, so that a wrong URL shows at once)."""
        async with self._lock:
            await self._fetch()

    async def verify(self, token: str) -> VerifiedIdentity:
        now = self._wall()
        trusted = self._trusted.get(token)
        if trusted is not None and now < trusted[0]:
            return trusted[1]
        identity = await self._check(token)
        exp = float(identity.claims["exp"])  # required, a number: PyJWT checked it
        self._trusted.pop(token, None)
        self._trusted[token] = (min(exp, now + TRUSTED_FOR), identity)
        while len(self._trusted) > TRUSTED_TOKENS:
            self._trusted.popitem(last=False)
        return identity

    async def _check(self, token: str) -> VerifiedIdentity:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("the token is not a well-formed JWT") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in ALGORITHMS:
            raise Unauthenticated(
                f"the token is signed with {shown(str(algorithm))!r}; only asymmetric "
                f"signatures are accepted ({', '.join(ALGORITHMS)})"
            )
        key = await self._key(kid if isinstance(kid, str) else None)
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated(_refusal(exc, self)) from None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise Unauthenticated("the token's sub is not a name")
        return VerifiedIdentity(subject, claims)

    async def _key(self, kid: str | None) -> Any:
        async with self._lock:
            now = self._clock()
            stale = self._fetched_at is None or now - self._fetched_at >= self.refresh_after
            unknown = kid not in self._keys and not (kid is None and len(self._keys) == 1)
            may_retry = self._tried_at is None or now - self._tried_at >= REFETCH_AFTER
            if (stale or unknown) and may_retry:
                await self._fetch()
            if not self._keys:
                raise IdentityUnavailable(
                    f"cannot check the token: no keys of issuer {self.issuer} ({self.problem})"
                )
            if kid is None and len(self._keys) == 1:
                return next(iter(self._keys.values()))
            if kid not in self._keys:
                raise Unauthenticated(
                    f"the token's key ({shown(str(kid))!r}) is not among issuer "
                    f"{self.issuer}'s keys"
                )
            return self._keys[kid]

    async def _fetch(self) -> None:
        self._tried_at = self._clock()
        try:
            keys, published = await asyncio.to_thread(self._read_keys)
        except IdentityUnavailable as exc:
            if str(exc) != self.problem:
                log.warning("jobs' token issuer: %s", exc)
            self.problem = str(exc)
            return
        if published != self._published:
            self._trusted.clear()  # a key gone or changed: its tokens are checked again
        self._keys, self._published = keys, published
        self._fetched_at = self._clock()
        if self.problem is not None:
            log.info("jobs' token issuer: %d keys of %s had again", len(keys), self.issuer)
            self.problem = None

    def _read_keys(self) -> tuple[dict[str | None, Any], str]:
        """The issuer's keys by kid, and the published set as text (to tell a change)."""
        url = self.jwks_url
        if url is None:
            discovery = self._get(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
            url = discovery.get("jwks_uri")
            if not isinstance(url, str):
                raise IdentityUnavailable(
                    f"the discovery document of {self.issuer} names no jwks_uri"
                )
        document = self._get(url)
        try:
            keys = jwt.PyJWKSet.from_dict(document).keys
        except jwt.PyJWTError as exc:
            raise IdentityUnavailable(f"{url} holds no usable key ({exc})") from None
        return {key.key_id: key for key in keys}, json.dumps(document["keys"], sort_keys=True)

    def _get(self, url: str) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if self.bearer_file:
            try:
                bearer = Path(self.bearer_file).read_text().strip()
            except OSError as exc:
                raise IdentityUnavailable(
                    f"cannot read {self.bearer_file} for {url}: {exc.strerror}"
                ) from None
            headers["Authorization"] = f"Bearer {bearer}"
        try:
            status, body = fetch(
                "GET",
                url,
                timeout=self.timeout,
                limit=MAX_DOCUMENT,
                headers=headers,
                ca_file=self.ca_file,
            )
        except httpx.HTTPError as exc:
            raise IdentityUnavailable(f"cannot reach {url}: {exc}") from None
        if not httpx.codes.is_success(status):
            raise IdentityUnavailable(f"{url} answered HTTP {status}")
        try:
            document = json.loads(body)
        except ValueError:
            raise IdentityUnavailable(f"{url} did not answer JSON") from None
        if not isinstance(document, dict):
            raise IdentityUnavailable(f"{url} did not answer a JSON object")
        return document


def _refusal(exc: Exception, verifier: JwksVerifier) -> str:  # noqa: PLR0911  (one reason per error)
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "the token has expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "the token is not valid yet (nbf or iat in the future)"
    if isinstance(exc, jwt.InvalidAudienceError):
        return f"the token is not for audience {verifier.audience!r}"
    if isinstance(exc, jwt.InvalidIssuerError):
        return f"the token was not issued by {verifier.issuer}"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "the token's signature does not verify with the issuer's key"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"the token has no {exc.claim!r} claim"
    return f"the token is not acceptable ({type(exc).__name__})"
