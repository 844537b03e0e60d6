"""Bearer tokens and what each may touch: the tokens file (``SIDECAR_TOKENS_FILE``) and
the workload identities it grants (docs/secure/index.md, docs/secure/workload-identity.md).

Every token is compared with ``hmac.compare_digest``, all of them on every request (no
early exit), so timing does not tell how much of a guess was right. The secrets live only
in ``TokenGrant.secret`` (excluded from ``repr``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import BaseModel, Field, Strict, ValidationError, model_validator

from spark_offset_sidecar.core.names import GRANT_PATTERN, TOKEN_NAME
from spark_offset_sidecar.core.patterns import matches_any
from spark_offset_sidecar.errors import ConfigError, Forbidden, RateLimited, Unauthenticated
from spark_offset_sidecar.http.models import checked_by
from spark_offset_sidecar.ports.identity import TokenVerifier, VerifiedIdentity

TOKENS_VARIABLE = "SIDECAR_TOKENS_FILE"
MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True)
class TokenGrant:
    name: str
    secret: bytes = field(repr=False)
    write: tuple[str, ...] = ()  # group patterns it may change; () = none
    read: tuple[str, ...] = ()  # group patterns it may read; () = none
    topics: tuple[str, ...] | None = None  # with write: the topics it may name
    events_per_second: float | None = None

    def may_write(self, group: str) -> bool:
        return matches_any(group, self.write)

    def may_read(self, group: str) -> bool:
        return matches_any(group, self.read)

    def check_write(self, group: str, topics: Iterable[str] = ()) -> None:
        """Raise ``Forbidden`` unless this token may move ``group``'s offsets on ``topics``."""
        if not self.may_write(group):
            raise Forbidden(f"token {self.name!r} may not write to consumer group {group!r}")
        if self.topics is not None:
            for topic in topics:
                if not matches_any(topic, self.topics):
                    raise Forbidden(
                        f"token {self.name!r} may not commit offsets of topic {topic!r}"
                    )

    def check_read(self, group: str) -> None:
        """Raise ``Forbidden`` unless this token may read ``group``'s state."""
        if not self.may_read(group):
            raise Forbidden(f"token {self.name!r} may not read consumer group {group!r}")


class TokenBucket:
    """``rate`` events a second with a burst of ``2 * rate`` (at least 1); ``now`` passed in."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, 2 * rate)
        self.tokens = self.capacity
        self.updated: float | None = None

    def take(self, now: float) -> float | None:
        """None if allowed, else the seconds until one more event is."""
        if self.updated is not None:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        return (1 - self.tokens) / self.rate


@dataclass(frozen=True)
class IdentityRule:
    """Grants ``grant`` to a verified token whose sub matches ``subject`` (when given) and
    whose claims match ``claims`` (claim path -> pattern, when given)."""

    grant: TokenGrant
    subject: str | None = None
    claims: tuple[tuple[tuple[str, ...], str], ...] = ()

    def matches(self, identity: VerifiedIdentity) -> bool:
        if self.subject is not None and not matches_any(identity.subject, (self.subject,)):
            return False
        return all(
            any(matches_any(v, (pattern,)) for v in _claim_strings(identity.claims, path))
            for path, pattern in self.claims
        )


def _claim_strings(claims: Any, path: tuple[str, ...]) -> list[str]:
    value = claims
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return []
        value = value[key]
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


class TokenRegistry:
    def __init__(
        self,
        grants: Sequence[TokenGrant],
        identities: Sequence[IdentityRule] = (),
        verifier: TokenVerifier | None = None,
    ) -> None:
        if identities and verifier is None:
            raise ConfigError(
                "SIDECAR_OIDC_ISSUER",
                f'{TOKENS_VARIABLE} grants "identities": they need the issuer whose tokens '
                "to check (SIDECAR_OIDC_ISSUER and SIDECAR_OIDC_AUDIENCE)",
            )
        self.grants = tuple(grants)
        self.identities = tuple(identities)
        self.verifier = verifier
        every = [*grants, *(rule.grant for rule in identities)]
        self._buckets = {
            g.name: TokenBucket(g.events_per_second) for g in every if g.events_per_second
        }

    @classmethod
    def from_file(cls, path: str | Path, verifier: TokenVerifier | None = None) -> TokenRegistry:
        try:
            document = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(TOKENS_VARIABLE, f"cannot read {path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(TOKENS_VARIABLE, f"{path} is not JSON ({exc.msg})") from None
        try:
            tokens_file = _TokensFile.model_validate(document)
        except ValidationError as exc:
            raise ConfigError(TOKENS_VARIABLE, _refusal(path, document, exc)) from None
        grants = [entry.grant(entry.token) for entry in tokens_file.tokens]
        return cls(grants, [entry.rule() for entry in tokens_file.identities], verifier)

    async def identify(self, authorization: str | None) -> TokenGrant:
        """The caller's grant: a JWT goes to the verifier (when one is set), anything else
        is a secret of the tokens file (``authenticate``)."""
        verifier = self.verifier
        if verifier is not None:
            scheme, _, presented = (authorization or "").partition(" ")
            presented = presented.strip()
            if scheme.lower() == "bearer" and verifier.looks_like_its_token(presented):
                identity = await verifier.verify(presented)
                for rule in self.identities:
                    if rule.matches(identity):
                        return rule.grant
                raise Forbidden(
                    f"identity {identity.subject!r} (verified) is granted nothing here: no "
                    '"identities" entry matches it'
                )
        return self.authenticate(authorization)

    def authenticate(self, authorization: str | None) -> TokenGrant:
        scheme, _, presented = (authorization or "").partition(" ")
        if scheme.lower() == "basic":  # a browser: any user name, the token as password
            presented = _basic_password(presented)
        elif scheme.lower() != "bearer":
            presented = ""
        if not presented.strip():
            raise Unauthenticated(
                "send Authorization: Bearer <token> (from a browser: Basic, the token as "
                "the password)"
            )
        candidate = presented.strip().encode()
        found: TokenGrant | None = None
        for grant in self.grants:  # all of them, always
            if hmac.compare_digest(candidate, grant.secret):
                found = grant
        if found is None:
            raise Unauthenticated("the token is not known")
        return found

    def admit_event(self, grant: TokenGrant, now: float) -> None:
        bucket = self._buckets.get(grant.name)
        if bucket is not None and (wait := bucket.take(now)) is not None:
            raise RateLimited(grant.name, wait)


def _basic_password(credentials: str) -> str:
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthenticated("Basic credentials must be base64 of user:token") from None
    return decoded.partition(":")[2]


# The tokens file as pydantic models; a refusal names the file, the entry and the key.
Pattern = Annotated[str, checked_by(GRANT_PATTERN)]
Patterns = Annotated[tuple[Pattern, ...], Field(min_length=1)]


ClaimPath = Annotated[str, Field(pattern="^[^/]+(/[^/]+)*$")]  # names split by /
Claims = Annotated[dict[ClaimPath, Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class _Entry(BaseModel, extra="forbid"):
    """What an entry grants, a token's or an identity's."""

    name: Annotated[str, checked_by(TOKEN_NAME)]
    write: Patterns | None = None
    read: Patterns | None = None
    topics: Patterns | None = None  # with write: the topics it may name
    events_per_second: Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _unambiguous(cls, entry: Any) -> Any:
        if not isinstance(entry, dict):
            return entry
        if "groups" in entry:
            raise ValueError(
                '"groups" is ambiguous (it granted writes, and "read": true added reads of the '
                'same groups): name what the token may do, "write": [group patterns] and/or '
                '"read": [group patterns]'
            )
        if isinstance(entry.get("read"), bool):
            raise ValueError(
                '"read": true|false is ambiguous; "read" is the list of group patterns the '
                'token may read (e.g. "read": ["*"])'
            )
        if "token" in entry and "token" not in cls.model_fields:
            raise ValueError('an identity is granted by "subject" and/or "claims", not by "token"')
        return entry

    @model_validator(mode="after")
    def _grants_something(self) -> Self:
        if self.write is None and self.read is None:
            raise ValueError('grants nothing: give "write" and/or "read" (lists of group patterns)')
        for key in ("topics", "events_per_second"):
            if self.write is None and getattr(self, key) is not None:
                raise ValueError(f'{key} limits what a token writes, and this one has no "write"')
        return self

    def grant(self, secret: str = "") -> TokenGrant:
        fields = (self.write or (), self.read or (), self.topics, self.events_per_second)
        return TokenGrant(self.name, secret.encode(), *fields)


class _Token(_Entry):
    token: Annotated[str, Field(min_length=MIN_TOKEN_LENGTH)]


class _Identity(_Entry):
    subject: Pattern | None = None  # a pattern of the token's sub
    claims: Claims | None = None  # claim path (keys split by /) -> pattern

    @model_validator(mode="after")
    def _names_somebody(self) -> Self:
        if self.subject is None and self.claims is None:
            raise ValueError(
                'names nobody: give "subject" (a pattern of the token\'s sub) and/or "claims"'
            )
        return self

    def rule(self) -> IdentityRule:
        claims = tuple((tuple(k.split("/")), v) for k, v in (self.claims or {}).items())
        return IdentityRule(self.grant(), self.subject, claims)


class _TokensFile(BaseModel, extra="forbid"):
    tokens: list[_Token] = []
    identities: list[_Identity] = []

    @model_validator(mode="after")
    def _each_once(self) -> Self:
        if not (self.tokens or self.identities):
            raise ValueError(
                'needs {"tokens": [...]} and/or {"identities": [...]} with at least one entry'
            )
        names = Counter(e.name for e in [*self.tokens, *self.identities])
        if twice := sorted(name for name, count in names.items() if count > 1):
            raise ValueError(f"token and identity names must be unique: {twice} given twice")
        if len({t.token for t in self.tokens}) != len(self.tokens):
            raise ValueError("two entries share one token")
        return self


# pydantic's refusals where the tokens file's words are other than its own.
_WORDS = {
    "model_type": "must be an object",
    "dict_type": "must be an object",
    "tuple_type": "must be a list",
    "too_short": "must not be empty",
    "missing": "is missing",
    "string_pattern_mismatch": "a claim path is names split by /, none of them empty",
}


def _refusal(path: str | Path, document: Any, exc: ValidationError) -> str:
    """The first problem ``exc`` found, in words that never show a secret: the file, the
    entry (``tokens[0] ('etl')``) and the key."""
    error = exc.errors()[0]
    cause, loc = error.get("ctx", {}).get("error"), error["loc"]
    problem = str(cause) if isinstance(cause, Exception) else _WORDS.get(error["type"])
    where = str(path)
    if len(loc) >= 2 and isinstance(loc[1], int):  # an entry's problem
        entry = document[loc[0]][loc[1]]
        name = entry.get("name") if isinstance(entry, dict) else None
        where += f": {loc[0]}[{loc[1]}]" + (f" ({name!r})" if isinstance(name, str) else "")
        loc = loc[2:]
    if error["type"] == "extra_forbidden":
        models: dict[str, type[BaseModel]] = {"tokens": _Token, "identities": _Identity}
        known = models.get(str(error["loc"][0]), _TokensFile).model_fields
        return f"{where}: unknown key {loc[-1]!r}; known: {sorted(known)}"
    key = "".join(f"[{p!r}]" if i else str(p) for i, p in enumerate(loc) if p != "[key]")
    problem = problem or error["msg"].replace("Input should be", "must be")
    return f"{where}: {key}: {problem}" if key else f"{where}: {problem}"
