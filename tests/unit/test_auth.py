"""Tokens: parsing the file, authenticating, grants, the rate limit."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from spark_offset_sidecar.errors import ConfigError, Forbidden, RateLimited, Unauthenticated
from spark_offset_sidecar.http.auth import TokenBucket, TokenRegistry
from spark_offset_sidecar.ports.identity import VerifiedIdentity
from spark_offset_sidecar.testing import StaticVerifier

ETL = "etl-token-0123456789abcdef"
OPS = "ops-token-0123456789abcdef"
TEAM = "team-token-0123456789abcdef"


def registry(tmp_path: Path, *entries: dict[str, Any]) -> TokenRegistry:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": list(entries)}))
    return TokenRegistry.from_file(str(path))


def test_authenticates_by_token_and_checks_write_and_read_grants_apart(tmp_path: Path) -> None:
    tokens = registry(
        tmp_path,
        {"name": "etl", "token": ETL, "write": ["orders-*"], "topics": ["orders", "orders.*"]},
        {"name": "ops", "token": OPS, "read": ["*"]},
        {"name": "team", "token": TEAM, "write": ["team-*"], "read": ["team-*", "shared"]},
    )
    etl = tokens.authenticate(f"Bearer {ETL}")
    assert etl.name == "etl"
    assert ETL not in repr(etl), "the secret stays out of repr"
    etl.check_write("orders-enricher", {"orders", "orders.eu"})
    with pytest.raises(Forbidden, match="consumer group 'payments'"):
        etl.check_write("payments", {"orders"})
    with pytest.raises(Forbidden, match="topic 'payments'"):
        etl.check_write("orders-enricher", {"payments"})
    with pytest.raises(Forbidden, match="may not read"):
        etl.check_read("orders-enricher")  # write-only
    ops = tokens.authenticate(f"bearer {OPS}")
    ops.check_read("anything")
    with pytest.raises(Forbidden, match="may not write"):
        ops.check_write("anything")  # read-only: it can never move offsets
    team = tokens.authenticate(f"Bearer {TEAM}")
    team.check_write("team-a")
    team.check_read("shared")
    with pytest.raises(Forbidden):
        team.check_write("shared")  # reads and writes have their own patterns
    for header in (None, "", "Bearer", f"Basic {ETL}", "Bearer not-a-known-token-at-all"):
        with pytest.raises(Unauthenticated):
            tokens.authenticate(header)


def test_rate_limit_allows_a_burst_then_says_when(tmp_path: Path) -> None:
    tokens = registry(
        tmp_path, {"name": "etl", "token": ETL, "write": ["*"], "events_per_second": 2}
    )
    grant = tokens.authenticate(f"Bearer {ETL}")
    for _ in range(4):  # burst: twice the rate
        tokens.admit_event(grant, now=100.0)
    with pytest.raises(RateLimited) as limited:
        tokens.admit_event(grant, now=100.0)
    assert limited.value.retry_after == pytest.approx(0.5)
    tokens.admit_event(grant, now=100.5)
    bucket = TokenBucket(0.1)
    assert bucket.take(0.0) is None
    assert bucket.take(0.0) == pytest.approx(10.0)


def _entry(**fields: Any) -> dict[str, Any]:
    return {"tokens": [{"name": "a", "token": ETL, **fields}]}


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("not json", "is not JSON"),
        ({"tokens": []}, "at least one"),
        (_entry(token="short", write=["*"]), "at least 16"),
        (_entry(write=[]), "tokens[0] ('a'): write: must not be empty"),
        (_entry(read=[""]), "read[0]: pattern must have 1 to 255 characters, not 0"),
        # Names and patterns keep core.names' rules (Unicode text, no control characters).
        (
            _entry(write=["orders-\ud800"]),
            "write[0]: pattern has a lone surrogate (U+D800)",
        ),
        (
            _entry(write=["*"], topics=["t\x00"]),
            "topics[0]: pattern has a control character (U+0000)",
        ),
        (_entry(read=["g" * 256]), "pattern must have 1 to 255 characters"),
        (
            {"tokens": [{"name": "a\nb", "token": ETL, "write": ["*"]}]},
            "name: token name has a control character",
        ),
        (_entry(write=["*"], x=1), "unknown key 'x'; known: ['events_per_second', 'name',"),
        (_entry(write=["*"], events_per_second=0), "events_per_second"),
        (_entry(write=["*"], events_per_second=float("nan")), "events_per_second"),
        (_entry(write=["*"], events_per_second=float("inf")), "events_per_second"),
        # A number is a JSON number, a list a JSON list: nothing is converted.
        (_entry(write=["*"], events_per_second="5"), "events_per_second: must be a valid number"),
        (_entry(write=["*"], events_per_second=True), "events_per_second: must be a valid number"),
        (_entry(write="orders-*"), "write: must be a list"),
        # Ambiguous or meaningless: refused, naming the entry.
        (_entry(groups=["*"], read=True), "tokens[0] ('a'): \"groups\" is ambiguous"),
        (_entry(groups=["orders-*"]), '"groups" is ambiguous'),
        (_entry(read=True), '"read": true|false is ambiguous'),
        (_entry(write=["*"], read=False), '"read": true|false is ambiguous'),
        (_entry(), "grants nothing"),
        (_entry(read=["*"], topics=["orders"]), "topics limits what a token writes"),
        (_entry(read=["*"], events_per_second=5), "events_per_second limits what"),
        (
            {
                "tokens": [
                    {"name": "a", "token": ETL, "write": ["*"]},
                    {"name": "a", "token": OPS, "read": ["*"]},
                ]
            },
            "token and identity names must be unique: ['a'] given twice",
        ),
        (
            {
                "tokens": [
                    {"name": "a", "token": ETL, "write": ["*"]},
                    {"name": "b", "token": ETL, "read": ["*"]},
                ]
            },
            "share one token",
        ),
    ],
)
def test_bad_token_files_fail_naming_the_variable_never_the_secret(
    tmp_path: Path, document: Any, problem: str
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    with pytest.raises(ConfigError) as caught:
        TokenRegistry.from_file(str(path))
    assert caught.value.variable == "SIDECAR_TOKENS_FILE"
    assert f"{path}" in str(caught.value)  # the file, then the entry and its key
    assert problem in str(caught.value)
    assert ETL not in str(caught.value)


TEAM_A_JOB = "jwt-of-team-a-orders-etl"
TEAM_B_JOB = "jwt-of-team-b-payments"


def identities(tmp_path: Path, *entries: dict[str, Any], tokens: Any = ()) -> TokenRegistry:
    path = tmp_path / "tokens.json"
    document: dict[str, Any] = {"identities": list(entries)}
    if tokens:
        document["tokens"] = list(tokens)
    path.write_text(json.dumps(document))
    verifier = StaticVerifier(
        {
            TEAM_A_JOB: VerifiedIdentity(
                "system:serviceaccount:team-a:orders-etl",
                {"kubernetes.io": {"namespace": "team-a"}, "groups": ["etl", "team-a"]},
            ),
            TEAM_B_JOB: VerifiedIdentity(
                "system:serviceaccount:team-b:payments", {"kubernetes.io": {"namespace": "team-b"}}
            ),
        }
    )
    return TokenRegistry.from_file(str(path), verifier)


def test_identities_grant_by_subject_and_claims_first_match_wins(tmp_path: Path) -> None:
    registry = identities(
        tmp_path,
        {"name": "team-a", "subject": "system:serviceaccount:team-a:*",
         "claims": {"kubernetes.io/namespace": "team-a", "groups": "etl"},
         "write": ["team-a-*"], "topics": ["orders"]},
        {"name": "everyone-reads", "subject": "system:serviceaccount:*", "read": ["*"]},
        tokens=[{"name": "ops", "token": OPS, "read": ["*"]}],
    )  # fmt: skip
    grant = asyncio.run(registry.identify(f"Bearer {TEAM_A_JOB}"))
    assert grant.name == "team-a"
    grant.check_write("team-a-orders", {"orders"})
    with pytest.raises(Forbidden, match="topic 'payments'"):
        grant.check_write("team-a-orders", {"payments"})
    other = asyncio.run(registry.identify(f"Bearer {TEAM_B_JOB}"))
    assert other.name == "everyone-reads"
    assert not other.write
    assert asyncio.run(registry.identify(f"Bearer {OPS}")).name == "ops", "secrets still work"


def test_a_verified_identity_without_a_grant_is_forbidden_naming_its_subject(
    tmp_path: Path,
) -> None:
    registry = identities(
        tmp_path,
        {"name": "team-a", "claims": {"kubernetes.io/namespace": "team-a"}, "write": ["*"]},
    )
    with pytest.raises(Forbidden, match="system:serviceaccount:team-b:payments"):
        asyncio.run(registry.identify(f"Bearer {TEAM_B_JOB}"))
    with pytest.raises(Unauthenticated, match="signature"):
        asyncio.run(registry.identify("Bearer eyJ-an-unknown-token"))


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"name": "x", "write": ["*"]}, "names nobody"),
        ({"name": "x", "subject": "a", "token": ETL, "write": ["*"]}, 'not by "token"'),
        ({"name": "x", "subject": "a"}, "grants nothing"),
        ({"name": "x", "claims": {}, "write": ["*"]}, "claims: must not be empty"),
        ({"name": "x", "claims": {"a//b": "c"}, "write": ["*"]}, "split by /"),
        ({"name": "x", "subject": "a", "write": ["*"], "groups": ["*"]}, "ambiguous"),
    ],
)
def test_bad_identity_entries_fail_naming_the_entry(
    tmp_path: Path, entry: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        identities(tmp_path, entry)
    assert "identities[0]" in str(caught.value)


def test_identities_without_an_issuer_fail_at_start(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"identities": [{"name": "a", "subject": "*", "read": ["*"]}]}))
    with pytest.raises(ConfigError, match="SIDECAR_OIDC_ISSUER"):
        TokenRegistry.from_file(str(path))
