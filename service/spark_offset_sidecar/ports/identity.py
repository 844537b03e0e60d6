"""The port towards an identity provider: who a job's token says it is.

A job may present, instead of a secret from the tokens file, a JWT its platform gave it (a
Kubernetes projected service-account token, a cloud workload-identity or CI OIDC token).
The HTTP layer asks a ``TokenVerifier`` what the token proves and grants by what comes
back (``http.auth``). The real verifier checks signatures against the issuer's JWKS
(``adapters.oidc.jwks_verifier``). No third-party import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class VerifiedIdentity:
    """A token whose signature, issuer, audience and times were checked."""

    subject: str
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False)


class TokenVerifier(Protocol):
    def looks_like_its_token(self, token: str) -> bool:
        """Whether ``token`` is for this verifier (a JWT), not a secret of the tokens file."""

    async def verify(self, token: str) -> VerifiedIdentity:
        """The identity the token proves; ``Unauthenticated`` naming why not (bad
        signature, expired, another audience or issuer); ``IdentityUnavailable`` when
        the issuer's keys cannot be had to check it."""

    async def refresh(self) -> None:
        """Fetch the issuer's keys now (at start: a wrong URL shows at once)."""

    @property
    def problem(self) -> str | None:
        """Why tokens cannot be checked now (keys unreachable), or None."""
