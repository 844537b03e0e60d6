"""Bearer tokens and what each may touch.

The tokens file (``SIDECAR_TOKENS_FILE``; a mounted Kubernetes Secret works as is) is JSON:

    {"tokens": [
      {"name": "orders-etl",            # shown in logs and answers; the secret never is
       "token": "…",                    # at least 16 characters
       "write": ["orders-*"],           # groups whose offsets it may move (fnmatch patterns)
       "topics": ["orders", "orders.*"],  # optional, with write: topics its offsets may name
       "events_per_second": 20},        # optional, with write: rate limit (burst: 2x, >= 1)
      {"name": "ops", "token": "…",
       "read": ["*"]}                   # groups whose state it may read (GET /v1/...)
    ]}

A token grants exactly what it names: ``write`` only (a Spark job), ``read`` only (an
operator, a dashboard), or both, each with its own group patterns. Writing is every route
that changes state (events, completions, releases, rewinds); reading is every ``GET /v1``
route. Entries whose meaning could be taken two ways are refused at start, naming the
entry: the old ``"groups"`` key (it granted writes, and ``"read": true`` silently added
reads of the same groups, so a token meant for reading could move offsets), ``"read":
true``, and ``topics`` or ``events_per_second`` on a token that cannot write.

Rules: every token is compared with ``hmac.compare_digest`` and all of them are compared
(no early exit), so timing does not tell how much of a guess was right. The secrets live
only in ``TokenGrant.secret`` (excluded from ``repr``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from spark_offset_sidecar.core.names import GRANT_PATTERN, TOKEN_NAME
from spark_offset_sidecar.core.patterns import matches_any
from spark_offset_sidecar.errors import ConfigError, Forbidden, RateLimited, Unauthenticated

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


_KEYS = frozenset({"name", "token", "write", "read", "topics", "events_per_second"})


def _grant(entry: Any, index: int) -> TokenGrant:
    where = f"tokens[{index}]"
    if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]:
        where += f" ({entry['name']!r})"

    def fail(problem: str) -> ConfigError:
        return ConfigError(TOKENS_VARIABLE, f"{where}: {problem}")

    if not isinstance(entry, dict):
        raise fail("must be an object")
    if "groups" in entry:
        raise fail(
            '"groups" is ambiguous (it granted writes, and "read": true added reads of the '
            'same groups): name what the token may do, "write": [group patterns] and/or '
            '"read": [group patterns]'
        )
    unknown = set(entry) - _KEYS
    if unknown:
        raise fail(f"unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    name, secret = entry.get("name"), entry.get("token")
    if problem := TOKEN_NAME.problem(name):
        raise fail(f"name: {problem}")
    if not isinstance(secret, str) or len(secret) < MIN_TOKEN_LENGTH:
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
