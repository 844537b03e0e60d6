"""Tokens: parsing the file, authenticating, grants, the rate limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.auth import Forbidden, RateLimited, TokenBucket, TokenRegistry, Unauthenticated
from service.errors import ConfigError

ETL = "etl-token-0123456789abcdef"
OPS = "ops-token-0123456789abcdef"


def registry(tmp_path: Path, *entries: dict[str, Any]) -> TokenRegistry:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": list(entries)}))
    return TokenRegistry.from_file(str(path))


def test_authenticates_by_token_and_checks_groups_and_topics(tmp_path: Path) -> None:
    tokens = registry(
        tmp_path,
        {"name": "etl", "token": ETL, "groups": ["orders-*"], "topics": ["orders", "orders.*"]},
        {"name": "ops", "token": OPS, "groups": ["*"], "read": True},
    )
    etl = tokens.authenticate(f"Bearer {ETL}")
    assert etl.name == "etl"
    assert ETL not in repr(etl), "the secret stays out of repr"
    etl.check("orders-enricher", {"orders", "orders.eu"})
    with pytest.raises(Forbidden, match="consumer group 'payments'"):
        etl.check("payments", {"orders"})
    with pytest.raises(Forbidden, match="topic 'payments'"):
        etl.check("orders-enricher", {"payments"})
    assert tokens.authenticate(f"bearer {OPS}").read
    for header in (None, "", "Bearer", f"Basic {ETL}", "Bearer not-a-known-token-at-all"):
        with pytest.raises(Unauthenticated):
            tokens.authenticate(header)


def test_rate_limit_allows_a_burst_then_says_when(tmp_path: Path) -> None:
    tokens = registry(
        tmp_path, {"name": "etl", "token": ETL, "groups": ["*"], "events_per_second": 2}
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


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("not json", "is not JSON"),
        ({"tokens": []}, "at least one"),
        ({"tokens": [{"name": "a", "token": "short", "groups": ["*"]}]}, "at least 16"),
        ({"tokens": [{"name": "a", "token": ETL, "groups": []}]}, "groups must be"),
        ({"tokens": [{"name": "a", "token": ETL, "groups": ["*"], "x": 1}]}, "unknown keys"),
        ({"tokens": [{"name": "a", "token": ETL, "groups": ["*"], "read": "yes"}]}, "read must"),
        (
            {"tokens": [{"name": "a", "token": ETL, "groups": ["*"], "events_per_second": 0}]},
            "events_per_second",
        ),
        (
            {
                "tokens": [
                    {"name": "a", "token": ETL, "groups": ["*"]},
                    {"name": "a", "token": OPS, "groups": ["*"]},
                ]
            },
            "unique",
        ),
        (
            {
                "tokens": [
                    {"name": "a", "token": ETL, "groups": ["*"]},
                    {"name": "b", "token": ETL, "groups": ["*"]},
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
    assert problem in str(caught.value)
    assert ETL not in str(caught.value)
