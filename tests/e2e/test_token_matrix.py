"""Every kind of token against every ``/v1`` route, on the real service and the real broker,
with Kafka as ground truth: a refused write moves no offset; an allowed one does.

Tokens: write-only, read-only (the ``ops`` example of docs/secure/index.md), both (own patterns), a
stranger (grants on other groups only), and none. A route addressed by query id answers
a query the token may not touch exactly as an unknown query."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.service_process import ServiceProcess
from tests.support.kafka import committed_offsets, unique_group
from tests.support.service import metric, spark_progress, wait_for

pytestmark = pytest.mark.kafka

SECRETS = {
    "writer": "writer-secret-token-1a2b3c4d",
    "reader": "reader-secret-token-5e6f7a8b",
    "both": "both-secret-token-9c0d1e2f3a",
    "stranger": "stranger-secret-token-4b5c6d",
}
WRITE_ROUTES = ("progress", "checkpoint", "complete", "allow-rewind", "release")
READ_ROUTES = ("list", "query", "status-list", "status", "starting-offsets")


def tokens_document() -> dict[str, Any]:
    return {
        "tokens": [
            {"name": "writer", "token": SECRETS["writer"], "write": ["team-a-*"]},
            {"name": "reader", "token": SECRETS["reader"], "read": ["*"]},
            {
                "name": "both",
                "token": SECRETS["both"],
                "write": ["team-b-*"],
                "read": ["team-b-*"],
            },
            {
                "name": "stranger",
                "token": SECRETS["stranger"],
                "write": ["other-*"],
                "read": ["other-*"],
            },
        ]
    }


# What each token may do, restated from the grants above: (may write, may read) per team.
MAY = {
    "writer": {"a": (True, False), "b": (False, False)},
    "reader": {"a": (False, True), "b": (False, True)},
    "both": {"a": (False, False), "b": (True, True)},
    "stranger": {"a": (False, False), "b": (False, False)},
}
HAS = {"writer": (True, False), "reader": (False, True), "both": (True, True)}
HAS["stranger"] = (True, True)


def expected_status(token: str | None, route: str, team: str) -> int:
    if token is None:
        return 401
    may_write, may_read = MAY[token][team]
    has_write, has_read = HAS[token]
    if route in WRITE_ROUTES:
        if may_write:
            return 200
        if not has_write:
            return 403  # no write grant at all: refused up front
        return 404 if route in ("complete", "release") else 403  # by query id: unknown
    if may_read or route in ("list", "status-list"):
        return 200 if has_read else 403
    if not has_read:
        return 403
    return 404 if route == "query" else 403


class Team:
    def __init__(self, name: str, topic: str) -> None:
        self.group = unique_group(f"team-{name}")
        self.query = str(uuid.uuid4())
        self.topic = topic


def call(
    http: httpx.Client, token: str | None, route: str, team: Team, batch: int
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {SECRETS[token]}"} if token else {}
    offsets = {team.topic: {"0": batch}}
    request: dict[str, Callable[[], httpx.Response]] = {
        "progress": lambda: http.post(
            "/v1/progress",
            json={"group_id": team.group, "progress": spark_progress(batch, offsets, team.query)},
            headers=headers,
        ),
        "checkpoint": lambda: http.post(
            f"/v1/queries/{team.query}/checkpoints",
            json={"checkpoint_id": batch, "group_id": team.group, "offsets": offsets},
            headers=headers,
        ),
        "complete": lambda: http.post(
            f"/v1/queries/{team.query}/checkpoints/{batch}/complete", headers=headers
        ),
        "allow-rewind": lambda: http.post(f"/v1/groups/{team.group}/allow-rewind", headers=headers),
        "release": lambda: http.delete(f"/v1/queries/{team.query}", headers=headers),
        "list": lambda: http.get("/v1/queries", headers=headers),
        "query": lambda: http.get(f"/v1/queries/{team.query}", headers=headers),
        "status-list": lambda: http.get("/v1/status", headers=headers),
        "status": lambda: http.get(f"/v1/status/{team.group}", headers=headers),
        "starting-offsets": lambda: http.get(
            f"/v1/groups/{team.group}/starting-offsets",
            params={"topic": team.topic},
            headers=headers,
        ),
    }
    return request[route]()


def test_every_token_kind_against_every_route_with_kafka_as_ground_truth(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(tokens_document()))
    topic = new_topic(1)
    teams = {"a": Team("a", topic), "b": Team("b", topic)}
    owner = {"a": "writer", "b": "both"}
    service = ServiceProcess(
        tmp_path, kafka_bootstrap, tokens_file=path, lag_read_interval_seconds=1
    ).start()
    http = service.http
    try:
        for name, team in teams.items():  # each team's job commits batch 10
            assert call(http, owner[name], "progress", team, 10).status_code == 200
            wait_for(
                lambda team=team: (
                    committed_offsets(kafka_bootstrap, team.group) == {(topic, 0): 10}
                ),
                what="the seed commit",
            )
        wait_for(  # the status list holds a group once the lag monitor has evaluated it
            lambda: all(
                team.group in call(http, "reader", "status-list", team, 0).text
                for team in teams.values()
            ),
            timeout=60,
            what="both groups in the status list",
        )

        # Every refused call first: none may move a committed offset.
        seen: dict[tuple[str | None, str, str], int] = {}
        for token in (None, "writer", "reader", "both", "stranger"):
            for route in WRITE_ROUTES + READ_ROUTES:
                for name, team in teams.items():
                    want = expected_status(token, route, name)
                    if want == 200 and route in WRITE_ROUTES:
                        continue  # allowed writes run below, in order
                    answer = call(http, token, route, team, 999)
                    seen[(token, route, name)] = answer.status_code
                    assert answer.status_code == want, (token, route, name, answer.text)
                    body = answer.json()
                    if want != 200:
                        assert {"outcome", "detail", "errors"} <= set(body), body
                    if want == 200 and route in ("list", "status-list"):
                        listed = json.dumps(body)
                        visible = MAY[token][name][1]
                        assert (team.group in listed) == visible, (token, route, name)
        for team in teams.values():
            assert committed_offsets(kafka_bootstrap, team.group) == {(topic, 0): 10}
        assert len(seen) > 60

        # A hidden query is answered exactly as an unknown one (ids aside).
        for token, name in (("stranger", "a"), ("writer", "b")):
            hidden = call(http, token, "complete", teams[name], 999)
            ghost = Team(name, topic)
            unknown = call(http, token, "complete", ghost, 999)
            assert hidden.status_code == unknown.status_code == 404
            assert hidden.json() == json.loads(unknown.text.replace(ghost.query, teams[name].query))
        ghost = Team("a", topic)
        hidden_read = call(http, "both", "query", teams["a"], 0)
        unknown_read = call(http, "both", "query", ghost, 0)
        assert hidden_read.status_code == unknown_read.status_code == 404
        assert hidden_read.text == unknown_read.text.replace(ghost.query, teams["a"].query)
        assert call(http, "reader", "query", teams["a"], 0).status_code == 200

        # Allowed writes, in a job's order: they reach Kafka.
        for name, team in teams.items():
            token = owner[name]
            assert call(http, token, "progress", team, 20).status_code == 200
            wait_for(lambda team=team: committed_offsets(kafka_bootstrap, team.group)
                     == {(topic, 0): 20}, what="progress committed")  # fmt: skip
            assert call(http, token, "checkpoint", team, 30).json()["outcome"] == "accepted"
            assert call(http, token, "complete", team, 30).json()["outcome"] == "accepted"
            wait_for(lambda team=team: committed_offsets(kafka_bootstrap, team.group)
                     == {(topic, 0): 30}, what="completion committed")  # fmt: skip
            assert call(http, token, "allow-rewind", team, 0).status_code == 200
            assert call(http, token, "release", team, 0).json()["outcome"] == "accepted"
            assert call(http, "reader", "query", team, 0).status_code == 404
        assert (
            metric(
                service.metrics(),
                "sidecar_events_invalid_total",
                reason="forbidden",
            )
            or 0
        ) > 0
    finally:
        service.stop()
