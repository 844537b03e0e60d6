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
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from spark_offset_sidecar.core.names import GRANT_PATTERN, TOKEN_NAME
from spark_offset_sidecar.core.patterns import matches_any
from spark_offset_sidecar.errors import ConfigError, Forbidden, RateLimited, Unauthenticated
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
        if not isinstance(document, dict):
            document = {}
        entries, identities = document.get("tokens", []), document.get("identities", [])
        unknown = set(document) - {"tokens", "identities"}
        if (
            unknown
            or not isinstance(entries, list)
            or not isinstance(identities, list)
            or not (entries or identities)
        ):
            raise ConfigError(
                TOKENS_VARIABLE,
                f'{path} needs {{"tokens": [...]}} and/or {{"identities": [...]}} with at '
                "least one entry" + (f" (unknown keys {sorted(unknown)})" if unknown else ""),
            )
        grants = [_grant(entry, index) for index, entry in enumerate(entries)]
        rules = [_identity(entry, index) for index, entry in enumerate(identities)]
        names = [g.name for g in grants] + [r.grant.name for r in rules]
        if len(set(names)) != len(names):
            raise ConfigError(TOKENS_VARIABLE, "token and identity names must be unique")
        if len({g.secret for g in grants}) != len(grants):
            raise ConfigError(TOKENS_VARIABLE, "two entries share one token")
        return cls(grants, rules, verifier)

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


_GRANTS = frozenset({"name", "write", "read", "topics", "events_per_second"})
_KEYS = _GRANTS | {"token"}
_IDENTITY_KEYS = _GRANTS | {"subject", "claims"}


def _identity(entry: Any, index: int) -> IdentityRule:
    fail = _failing(entry, f"identities[{index}]")
    if isinstance(entry, dict) and "token" in entry:
        raise fail('an identity is granted by "subject" and/or "claims", not by "token"')
    grant = _grant(entry, index, kind="identities", keys=_IDENTITY_KEYS)
    subject, claims = entry.get("subject"), entry.get("claims")
    if subject is None and claims is None:
        raise fail('names nobody: give "subject" (a pattern of the token\'s sub) and/or "claims"')
    if subject is not None and (problem := GRANT_PATTERN.problem(subject)):
        raise fail(f"subject: {problem}")
    rules: list[tuple[tuple[str, ...], str]] = []
    if claims is not None:
        if not isinstance(claims, dict) or not claims:
            raise fail("claims, when given, must be a non-empty object of claim path -> pattern")
        for path, pattern in claims.items():
            keys = tuple(path.split("/"))
            if not all(keys) or not isinstance(pattern, str) or not pattern:
                raise fail(f"claims[{path!r}]: a path of names split by / -> a non-empty pattern")
            rules.append((keys, pattern))
    return IdentityRule(grant, subject, tuple(rules))


def _failing(entry: Any, where: str) -> Callable[[str], ConfigError]:
    if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]:
        where += f" ({entry['name']!r})"

    def fail(problem: str) -> ConfigError:
        return ConfigError(TOKENS_VARIABLE, f"{where}: {problem}")

    return fail


def _grant(  # noqa: C901, PLR0912  (one check per field of a token entry)
    entry: Any, index: int, *, kind: str = "tokens", keys: frozenset[str] = _KEYS
) -> TokenGrant:
    fail = _failing(entry, f"{kind}[{index}]")
    if not isinstance(entry, dict):
        raise fail("must be an object")
    if "groups" in entry:
        raise fail(
            '"groups" is ambiguous (it granted writes, and "read": true added reads of the '
            'same groups): name what the token may do, "write": [group patterns] and/or '
            '"read": [group patterns]'
        )
    unknown = set(entry) - keys
    if unknown:
        raise fail(f"unknown keys {sorted(unknown)}; known: {sorted(keys)}")
    name, secret = entry.get("name"), entry.get("token", "")
    if problem := TOKEN_NAME.problem(name):
        raise fail(f"name: {problem}")
    if "token" in keys and (not isinstance(secret, str) or len(secret) < MIN_TOKEN_LENGTH):
        raise fail(f"token must be a string of at least {MIN_TOKEN_LENGTH} characters")
    write, read = entry.get("write"), entry.get("read")
    if isinstance(read, bool):
        raise fail(
            '"read": true|false is ambiguous; "read" is the list of group patterns the token '
            'may read (e.g. "read": ["*"])'
        )
    for key, value in (("write", write), ("read", read)):
        if value is not None and (problem := _patterns_problem(value)):
            raise fail(f"{key}, when given, must be a non-empty list of group patterns: {problem}")
    if write is None and read is None:
        raise fail('grants nothing: give "write" and/or "read" (lists of group patterns)')
    topics = entry.get("topics")
    if topics is not None and (problem := _patterns_problem(topics)):
        raise fail(f"topics, when given, must be a non-empty list of topic patterns: {problem}")
    rate = entry.get("events_per_second")
    if rate is not None and (
        isinstance(rate, bool)
        or not isinstance(rate, int | float)
        or not math.isfinite(rate)
        or rate <= 0
    ):
        raise fail("events_per_second must be a positive finite number")
    if write is None:
        for key, value in (("topics", topics), ("events_per_second", rate)):
            if value is not None:
                raise fail(f'{key} limits what a token writes, and this one has no "write"')
    return TokenGrant(
        cast(str, name),  # TOKEN_NAME checked it
        secret.encode(),
        write=tuple(cast(list[str], write or ())),  # _patterns_problem checked both
        read=tuple(cast(list[str], read or ())),
        topics=tuple(cast(list[str], topics)) if topics is not None else None,
        events_per_second=float(rate) if rate is not None else None,
    )


def _patterns_problem(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return "not a non-empty list"
    for index, pattern in enumerate(value):
        if problem := GRANT_PATTERN.problem(pattern):
            return f"[{index}]: {problem}"
    return None
