"""Every refusal has the one documented shape, whichever layer produces it: FastAPI's body
parsing (nested too deep, not UTF-8, not JSON), validation, Starlette's routing, the body
limit, the routes themselves (``http.refusals``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.settings import DatabaseSettings, HttpSettings, Settings
from tests.support.app import doubles

SHAPE = {"outcome", "detail", "errors"}


# The tests on the module's app (made once) run on one worker.
ON_MODULE_APP = pytest.mark.xdist_group("http-refusals")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One app for the module's tests that only send what it refuses."""
    folder = tmp_path_factory.mktemp("refusing")
    settings = Settings(
        database=DatabaseSettings(url=f"sqlite:///{folder / 'sidecar.db'}"),
        http=HttpSettings(max_body_bytes=4096),
    )
    app = create_app(settings, doubles(settings))
    with TestClient(app) as test_client:
        yield test_client


def refused(answer: Any, status: int, outcome: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert set(body) >= SHAPE, body
    assert body["outcome"] == outcome, body
    assert isinstance(body["detail"], str), body
    assert body["detail"], body
    assert all(set(error) == {"field", "problem"} for error in body["errors"]), body
    return body


JSON = {"content-type": "application/json"}


@ON_MODULE_APP
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"group_id": "g\xff\xfe", "progress": {}}', "is not valid UTF-8"),
        (b'{"group_id": ', "is not JSON (Expecting value at position 13)"),
    ],
)
def test_bodies_that_do_not_parse_are_refused_in_the_one_shape(
    client: TestClient, content: bytes, problem: str
) -> None:
    answer = client.post("/v1/progress", content=content, headers=JSON)
    body = refused(answer, 422, "invalid")
    assert body["errors"] == [{"field": "body", "problem": problem}], body


def test_deep_nesting_within_the_body_limit_is_refused_naming_the_problem(tmp_path: Path) -> None:
    # 200,000 levels: too deep for json on every Python (3.13 parses 2,000, 3.11 does not).
    settings = Settings(database=DatabaseSettings(url=f"sqlite:///{tmp_path / 'sidecar.db'}"))
    app = create_app(settings, doubles(settings))
    with TestClient(app) as client:
        deep = b"[" * 200_000 + b"]" * 200_000
        body = refused(client.post("/v1/progress", content=deep, headers=JSON), 422, "invalid")
    assert body["errors"] == [{"field": "body", "problem": "is nested too deep to parse"}]


@ON_MODULE_APP
def test_routing_validation_and_route_refusals_share_the_shape(client: TestClient) -> None:
    refused(client.get("/v1/no-such-route"), 404, "not_found")
    refused(client.put("/v1/progress", json={}), 405, "method_not_allowed")
    refused(client.post("/v1/progress", json={"group_id": "g"}), 422, "invalid")
    refused(client.post("/v1/progress", content=b"x" * 5000, headers=JSON), 413, "invalid")
    refused(client.get("/v1/queries/no-such-query"), 404, "unknown_query")
    refused(client.post("/v1/queries/q/checkpoints/1/complete"), 404, "unknown_query")
    refused(client.post("/v1/queries/q/checkpoints/-1/complete"), 422, "invalid")
    refused(client.post(f"/v1/queries/q/checkpoints/{2**63}/complete"), 422, "invalid")
    refused(client.get("/v1/status/no-such-group"), 404, "unknown_query")
    refused(client.post("/v1/groups/nobody/allow-rewind"), 404, "unknown_query")
    too_many = [("topic", f"t{i}") for i in range(101)]  # SIDECAR_MAX_TOPICS_PER_EVENT: 100
    body = refused(client.get("/v1/groups/g/starting-offsets", params=too_many), 422, "invalid")
    assert body["errors"] == [
        {"field": "topic", "problem": "101 topics; at most 100 (SIDECAR_MAX_TOPICS_PER_EVENT)"}
    ]


def test_with_tokens_reads_need_one_and_the_scrape_and_probes_stay_open(tmp_path: Path) -> None:
    """What the chart's values and the security page say: with tokens (reads protected by
    default) /v1/* and /ui need a token that may read; /metrics, /livez, /readyz and
    /v1/service (the version and what runs, nothing of any group) do not."""
    from tests.support.app import settings_for

    tokens = tmp_path / "tokens.json"
    secret = "reader-secret-0123456789abcdefghij"
    tokens.write_text(json.dumps({"tokens": [{"name": "reader", "token": secret, "read": ["*"]}]}))
    settings = settings_for(tmp_path, tokens_file=str(tokens))
    app = create_app(settings, doubles(settings))
    with TestClient(app) as client:
        for path in ("/metrics", "/livez", "/readyz", "/v1/service"):
            assert client.get(path).status_code == 200, path
        for path in ("/v1/status", "/v1/queries", "/ui"):
            assert client.get(path).status_code == 401, path
            answer = client.get(path, headers={"authorization": f"Bearer {secret}"})
            assert answer.status_code == 200, path
