"""The hot path of ``POST /v1/progress`` (``http.progress_route``) answers exactly as the
FastAPI route does: the same requests go to two apps in the same state, one through the
hot path (``Content-Type: application/json``) and one through FastAPI's route (a JSON
media type the hot path leaves to it), and every answer is compared: status, body and
headers. A counter on the hot path shows which requests it answered."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.http import access, progress_route
from spark_offset_sidecar.testing import InMemoryStore
from tests.support.app import doubles, settings_for
from tests.support.service import spark_progress

TOKENS = {
    "tokens": [
        {"name": "team-a", "token": "team-a-secret-0001", "write": ["a-*"], "topics": ["orders"]},
        {"name": "slow", "token": "slow-secret-00001", "write": ["s-*"], "events_per_second": 0.5},
        {"name": "ops", "token": "ops-secret-000001", "read": ["*"]},
    ]
}
HOT = "application/json"
ROUTED = "application/vnd.spark-progress+json"  # JSON to FastAPI, not taken by the hot path
COMPARED_HEADERS = ("content-type", "content-length", "retry-after", "www-authenticate")


def progress(batch: int, group: str = "a-orders", **kw: Any) -> dict[str, Any]:
    return {
        "group_id": group,
        "progress": spark_progress(batch, {"orders": {"0": 10 * batch}}, query=f"q-{group}", **kw),
    }


# (what, body, token): in order, against one app's state.
REQUESTS: list[tuple[str, Any, str | None]] = [
    ("accepted", progress(1), "team-a-secret-0001"),
    ("duplicate", progress(1), "team-a-secret-0001"),
    ("accepted, newer", progress(3), "team-a-secret-0001"),
    ("stale", progress(2), "team-a-secret-0001"),
    (
        "conflict: another query",
        progress(4) | {"progress": progress(4)["progress"] | {"id": "q-other"}},
        "team-a-secret-0001",
    ),
    ("no token", progress(5), None),
    ("wrong token", progress(5), "nope-nope-nope-nope"),
    ("read-only token", progress(5), "ops-secret-000001"),
    ("group not granted", progress(5, group="b-orders"), "team-a-secret-0001"),
    (
        "topic not granted",
        {
            "group_id": "a-orders",
            "progress": spark_progress(5, {"payments": {"0": 1}}, query="q-a-orders"),
        },
        "team-a-secret-0001",
    ),
    ("rate limit: first", progress(1, group="s-1"), "slow-secret-00001"),
    ("rate limit: second", progress(2, group="s-1"), "slow-secret-00001"),
    ("bad batch id", progress(-1), "team-a-secret-0001"),
    (
        "bad partition",
        {
            "group_id": "a-orders",
            "progress": spark_progress(6, {"orders": {"x": 1}}, query="q-a-orders"),
        },
        "team-a-secret-0001",
    ),
    (
        "bad offset type",
        {
            "group_id": "a-orders",
            "progress": spark_progress(6, {"orders": {"0": "1"}}, query="q-a-orders"),
        },
        "team-a-secret-0001",
    ),
    ("extra field", progress(6) | {"extra": 1}, "team-a-secret-0001"),
    ("no group", {"progress": progress(6)["progress"]}, "team-a-secret-0001"),
    ("group not a string", progress(6) | {"group_id": 7}, "team-a-secret-0001"),
    ("control character in group", progress(6, group="a-\x07"), "team-a-secret-0001"),
    ("progress not an object", {"group_id": "a-orders", "progress": [1]}, "team-a-secret-0001"),
    ("not an object", [1, 2], "team-a-secret-0001"),
    ("not JSON", b"{nope", "team-a-secret-0001"),
    ("accepted again", progress(7), "team-a-secret-0001"),
    ("its cluster named", progress(8) | {"cluster": "default"}, "team-a-secret-0001"),
    ("cluster null", progress(9) | {"cluster": None}, "team-a-secret-0001"),
    ("cluster the service lacks", progress(10) | {"cluster": "eu"}, "team-a-secret-0001"),
    ("cluster not a name", progress(10) | {"cluster": "EU west"}, "team-a-secret-0001"),
    ("cluster not a string", progress(10) | {"cluster": 1}, "team-a-secret-0001"),
]


def _app(tmp_path: Path, store: InMemoryStore | None = None) -> TestClient:
    tmp_path.mkdir()
    (tmp_path / "tokens.json").write_text(json.dumps(TOKENS))
    settings = settings_for(tmp_path, tokens_file=str(tmp_path / "tokens.json"))
    app = create_app(
        settings,
        doubles(settings, store=store, clock=lambda: 1_800_000_000.0),
    )
    return TestClient(app, raise_server_exceptions=False)


def _send(client: TestClient, body: Any, token: str | None, content_type: str) -> Any:
    headers = {"content-type": content_type}
    if token:
        headers["authorization"] = f"Bearer {token}"
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = client.post("/v1/progress", content=content, headers=headers)
    return (
        answer.status_code,
        answer.content,
        {h: answer.headers.get(h) for h in COMPARED_HEADERS},
    )


@pytest.fixture
def hot_answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    answered: list[str] = []
    real = progress_route.record_progress

    async def counted(
        request: Any, group_id: str, body: dict[str, Any], cluster: str | None = None
    ) -> Any:
        answered.append(group_id)
        return await real(request, group_id, body, cluster)

    monkeypatch.setattr(progress_route, "record_progress", counted)
    return answered


def test_every_answer_of_the_hot_path_is_the_routes(
    tmp_path: Path, hot_answers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The token buckets' clock stands still: a refusal's "retry in 2.0 s" is then the same
    # on both apps however long the machine takes between their requests.
    monkeypatch.setattr(access, "time", SimpleNamespace(monotonic=lambda: 1_000.0))
    with _app(tmp_path / "hot") as hot, _app(tmp_path / "routed") as routed:
        for what, body, token in REQUESTS:
            through_hot = _send(hot, body, token, HOT)
            taken = len(hot_answers)
            through_route = _send(routed, body, token, ROUTED)
            assert len(hot_answers) == taken  # the routed app's request skips the hot path...
            assert through_hot == through_route, what
        # ... and the hot path took the 18 well-formed ones, refused or not (not the 10 others).
        assert len(hot_answers) == 18, hot_answers
        assert (
            hot.get("/v1/queries/q-a-orders").json() == routed.get("/v1/queries/q-a-orders").json()
        )


def test_a_store_that_fails_is_answered_503_on_both_paths(
    tmp_path: Path, hot_answers: list[str]
) -> None:
    stores = InMemoryStore(), InMemoryStore()
    with _app(tmp_path / "hot", stores[0]) as hot, _app(tmp_path / "routed", stores[1]) as routed:
        for store in stores:
            store.fail_with = StoreUnavailable("disk full")
        answers = [
            _send(hot, progress(1), "team-a-secret-0001", HOT),
            _send(routed, progress(1), "team-a-secret-0001", ROUTED),
        ]
    assert answers[0] == answers[1]
    assert answers[0][0] == 503
    assert b"disk full" in answers[0][1]
    assert hot_answers == ["a-orders"]


def test_the_body_limit_still_applies_to_the_hot_path(tmp_path: Path) -> None:
    with _app(tmp_path / "hot") as hot:
        padded = progress(1) | {"progress": progress(1)["progress"] | {"name": "x" * 2_000_000}}
        status, body, _ = _send(hot, padded, "team-a-secret-0001", HOT)
    assert status == 413, body


# (what, body, token, the answer while starting): an event's own refusals come first.
WHILE_STARTING: list[tuple[str, Any, str | None, int]] = [
    ("no token", progress(1), None, 401),
    ("wrong token", progress(1), "nope-nope-nope-nope", 401),
    ("read-only token", progress(1), "ops-secret-000001", 403),
    ("group not granted", progress(1, group="b-orders"), "team-a-secret-0001", 403),
    ("bad batch id", progress(-1), "team-a-secret-0001", 422),
    ("cluster not a name", progress(1) | {"cluster": "EU west"}, "team-a-secret-0001", 422),
    ("well formed and granted", progress(1), "team-a-secret-0001", 503),
]


@pytest.mark.parametrize("content_type", [HOT, ROUTED])
def test_while_starting_an_events_own_refusals_come_before_503(
    tmp_path: Path, content_type: str
) -> None:
    """Before the lifespan has started the ledger, an event the service would refuse
    whenever it came (its token, its grants, its shape) is refused as such; only one it
    would take is answered 503 "starting" (a caller retries that one, not the others)."""
    client = _app(tmp_path / "app")  # not entered: its lifespan has not run, nothing started
    answers = {
        what: _send(client, body, token, content_type)[0] for what, body, token, _ in WHILE_STARTING
    }
    assert answers == {what: code for what, _, _, code in WHILE_STARTING}
