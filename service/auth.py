"""Bearer tokens and what each may touch.

The tokens file (``SIDECAR_TOKENS_FILE``; a mounted Kubernetes Secret works as is) is JSON:

    {"tokens": [
      {"name": "orders-etl",            # shown in logs and answers; the secret never is
       "token": "…",                    # at least 16 characters
       "groups": ["orders-*"],          # consumer groups it may move (fnmatch patterns)
       "topics": ["orders", "orders.*"],  # optional: topics its offsets may name
       "read": true,                    # optional: may read state (GET /v1/...)
       "events_per_second": 20}         # optional: rate limit (burst: twice that, >= 1)
    ]}

Rules: every token is compared with ``hmac.compare_digest`` and all of them are compared
(no early exit), so timing does not tell how much of a guess was right. The secrets live
only in ``TokenGrant.secret`` (excluded from ``repr``).
"""

from __future__ import annotations

import fnmatch
import hmac
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from service.errors import ConfigError

TOKENS_VARIABLE = "SIDECAR_TOKENS_FILE"
MIN_TOKEN_LENGTH = 16


class Unauthenticated(Exception):
    """No token, or not a known one (401)."""


class Forbidden(Exception):
    """A known token outside its grant (403)."""


class RateLimited(Exception):
    """A token over its events-per-second (429)."""

    def __init__(self, name: str, retry_after: float) -> None:
        super().__init__(f"token {name!r} is over its rate; retry in {retry_after:.1f} s")
        self.retry_after = retry_after


@dataclass(frozen=True)
class TokenGrant:
    name: str
    secret: bytes = field(repr=False)
    groups: tuple[str, ...]
    topics: tuple[str, ...] | None = None
    read: bool = False
    events_per_second: float | None = None

    def may_touch(self, group: str) -> bool:
        return any(fnmatch.fnmatchcase(group, pattern) for pattern in self.groups)

    def check(self, group: str, topics: Iterable[str] = ()) -> None:
        """Raise ``Forbidden`` unless this token may move ``group``'s offsets on ``topics``."""
        if not self.may_touch(group):
            raise Forbidden(f"token {self.name!r} may not touch consumer group {group!r}")
        if self.topics is not None:
            for topic in topics:
                if not any(fnmatch.fnmatchcase(topic, p) for p in self.topics):
                    raise Forbidden(
                        f"token {self.name!r} may not commit offsets of topic {topic!r}"
                    )


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


class TokenRegistry:
    def __init__(self, grants: Sequence[TokenGrant]) -> None:
        self.grants = tuple(grants)
        self._buckets = {
            g.name: TokenBucket(g.events_per_second) for g in grants if g.events_per_second
        }

    @classmethod
    def from_file(cls, path: str) -> TokenRegistry:
        try:
            document = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(TOKENS_VARIABLE, f"cannot read {path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(TOKENS_VARIABLE, f"{path} is not JSON ({exc.msg})") from None
        entries = document.get("tokens") if isinstance(document, dict) else None
        if not isinstance(entries, list) or not entries:
            raise ConfigError(
                TOKENS_VARIABLE, f'{path} needs {{"tokens": [...]}} with at least one'
            )
        grants = [_grant(entry, index) for index, entry in enumerate(entries)]
        names = [g.name for g in grants]
        if len(set(names)) != len(names):
            raise ConfigError(TOKENS_VARIABLE, "token names must be unique")
        if len({g.secret for g in grants}) != len(grants):
            raise ConfigError(TOKENS_VARIABLE, "two entries share one token")
        return cls(grants)

    def authenticate(self, authorization: str | None) -> TokenGrant:
        scheme, _, presented = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise Unauthenticated("send Authorization: Bearer <token>")
        candidate = presented.strip().encode()
        found: TokenGrant | None = None
        for grant in self.grants:  # all of them, always
            if hmac.compare_digest(candidate, grant.secret):
                found = grant
        if found is None:
            raise Unauthenticated("the bearer token is not known")
        return found

    def admit_event(self, grant: TokenGrant, now: float) -> None:
        bucket = self._buckets.get(grant.name)
        if bucket is not None and (wait := bucket.take(now)) is not None:
            raise RateLimited(grant.name, wait)


def _grant(entry: Any, index: int) -> TokenGrant:
    where = f"tokens[{index}]"

    def fail(problem: str) -> ConfigError:
        return ConfigError(TOKENS_VARIABLE, f"{where}: {problem}")

    if not isinstance(entry, dict):
        raise fail("must be an object")
    unknown = set(entry) - {"name", "token", "groups", "topics", "read", "events_per_second"}
    if unknown:
        raise fail(f"unknown keys {sorted(unknown)}")
    name, secret = entry.get("name"), entry.get("token")
    groups = entry.get("groups")
    if not isinstance(name, str) or not name:
        raise fail("name must be a non-empty string")
    if not isinstance(secret, str) or len(secret) < MIN_TOKEN_LENGTH:
        raise fail(f"token must be a string of at least {MIN_TOKEN_LENGTH} characters")
    if not _patterns(groups):
        raise fail("groups must be a non-empty list of names or patterns")
    topics = entry.get("topics")
    if topics is not None and not _patterns(topics):
        raise fail("topics, when given, must be a non-empty list of names or patterns")
    rate = entry.get("events_per_second")
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, int | float) or rate <= 0
    ):
        raise fail("events_per_second must be a positive number")
    read = entry.get("read", False)
    if not isinstance(read, bool):
        raise fail("read must be true or false")
    return TokenGrant(
        name,
        secret.encode(),
        tuple(cast(list[str], groups)),  # _patterns checked both
        tuple(cast(list[str], topics)) if topics is not None else None,
        read,
        float(rate) if rate is not None else None,
    )


def _patterns(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)
