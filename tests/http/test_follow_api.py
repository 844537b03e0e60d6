"""``/v1/followed-folders`` in-process: the real app on a real SQLite file and the real
fsspec storage on a local folder; the committer is the in-memory one (the broker is in
``tests/e2e/test_checkpoint_follower.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.testing import InMemoryCommitter, MemoryKafka
from tests.support.app import doubles, settings_for
from tests.support.checkpoints import write_batch
from tests.support.service import metric, wait_for

TOKENS = {
    "tokens": [
        {
            "name": "team-a",
            "token": "team-a-secret-0001",
            "write": ["a-*"],
            "read": ["a-*"],
            "topics": ["orders"],
        },
        {"name": "ops", "token": "ops-secret-000001", "read": ["*"]},
    ]
}
TEAM_A = {"Authorization": "Bearer team-a-secret-0001"}
OPS = {"Authorization": "Bearer ops-secret-000001"}


@pytest.fixture
def committer() -> InMemoryCommitter:
    return InMemoryCommitter()


@pytest.fixture
def client(tmp_path: Path, committer: InMemoryCommitter) -> Iterator[TestClient]:
    (tmp_path / "tokens.json").write_text(json.dumps(TOKENS))
    settings = settings_for(
        tmp_path, tokens_file=str(tmp_path / "tokens.json"), follow_interval_seconds=0.05
    )
    app = create_app(settings, doubles(settings, MemoryKafka(committer=committer)))
    with TestClient(app) as test_client:
        yield test_client


# The tests on the module's unchanging app (made once) run on one worker.
ON_UNCHANGING = pytest.mark.xdist_group("http-follow-unchanging")


@pytest.fixture(scope="module")
def unchanging(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One app for the module's tests whose requests are refused: each asserts that
    nothing was followed."""
    folder = tmp_path_factory.mktemp("unchanging")
    (folder / "tokens.json").write_text(json.dumps(TOKENS))
    settings = settings_for(folder, tokens_file=str(folder / "tokens.json"))
    with TestClient(create_app(settings, doubles(settings))) as test_client:
        yield test_client


def test_a_followed_folder_is_committed_and_shown(
    client: TestClient, committer: InMemoryCommitter, tmp_path: Path
) -> None:
    folder = tmp_path / "ckpt"
    answer = client.post(
        "/v1/followed-folders", json={"path": f"{folder}/", "group_id": "a-orders"}, headers=TEAM_A
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["path"] == str(folder)  # one spelling: no trailing slash
    assert answer.json()["topics"] == ["orders"]
    write_batch(folder, "q-1", 0, '{"orders":{"0":42}}', '{"logOffset":0}')
    wait_for(lambda: committer.commits, what="a commit")
    first = committer.commits[0]
    assert (first.group_id, first.offsets) == ("a-orders", {TopicPartition("orders", 0): 42})
    listed = client.get("/v1/followed-folders", headers=OPS).json()
    assert [(f["path"], f["last_batch_recorded"], f["errors"]) for f in listed] == [
        (str(folder), 0, {})
    ]
    text = client.get("/metrics").text
    assert metric(text, "sidecar_followed_folder_last_batch", folder=str(folder)) == 0
    assert (metric(text, "sidecar_checkpoint_storage_requests_total") or 0) >= 3
    assert (metric(text, "sidecar_followed_folder_polls_total", folder=str(folder)) or 0) >= 1
    again = client.post(
        "/v1/followed-folders", json={"path": str(folder), "group_id": "a-orders"}, headers=TEAM_A
    )
    assert again.status_code == 200
    other = client.post(
        "/v1/followed-folders", json={"path": str(folder), "group_id": "a-other"}, headers=TEAM_A
    )
    assert other.status_code == 409
    assert "already followed into group 'a-orders'" in other.json()["detail"]


def test_a_topic_outside_the_registering_token_is_refused_and_counted(
    client: TestClient, committer: InMemoryCommitter, tmp_path: Path
) -> None:
    folder = tmp_path / "ckpt"
    write_batch(folder, "q-1", 0, '{"payments":{"0":5}}')
    answer = client.post(
        "/v1/followed-folders", json={"path": str(folder), "group_id": "a-pay"}, headers=TEAM_A
    )
    assert answer.status_code == 201
    wait_for(
        lambda: client.get("/v1/followed-folders", headers=OPS).json()[0]["errors"],
        what="the refusal",
    )
    status = client.get("/v1/followed-folders", headers=OPS).json()[0]
    assert status["errors"] == {"forbidden_topic": status["errors"]["forbidden_topic"]}
    assert "may not commit offsets of ['payments']" in status["last_error"]
    assert committer.commits == []


@ON_UNCHANGING
@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({"path": "relative/ckpt", "group_id": "a-x"}, 422, "absolute path"),
        ({"path": "nope://b/ckpt", "group_id": "a-x"}, 422, "not a filesystem"),
        ({"path": "/ckpt\n", "group_id": "a-x"}, 422, "path"),
        ({"path": "/ckpt", "group_id": "b-x"}, 403, "may not write to consumer group 'b-x'"),
        ({"path": "/ckpt", "group_id": "a-x", "extra": 1}, 422, "extra"),
    ],
)
def test_bad_registrations_are_refused_naming_the_problem(
    unchanging: TestClient, body: dict[str, object], code: int, words: str
) -> None:
    answer = unchanging.post("/v1/followed-folders", json=body, headers=TEAM_A)
    assert answer.status_code == code, answer.text
    assert words in answer.text
    assert unchanging.get("/v1/followed-folders", headers=OPS).json() == []


def test_registering_needs_a_write_grant_and_unfollowing_removes(
    client: TestClient, tmp_path: Path
) -> None:
    body = {"path": str(tmp_path / "c"), "group_id": "a-x"}
    assert client.post("/v1/followed-folders", json=body).status_code == 401
    assert client.post("/v1/followed-folders", json=body, headers=OPS).status_code == 403
    assert client.post("/v1/followed-folders", json=body, headers=TEAM_A).status_code == 201
    params = {"path": str(tmp_path / "c")}
    assert client.delete("/v1/followed-folders", params=params, headers=OPS).status_code == 403
    assert client.delete("/v1/followed-folders", params=params, headers=TEAM_A).status_code == 200
    assert client.delete("/v1/followed-folders", params=params, headers=TEAM_A).status_code == 404
    assert client.get("/v1/followed-folders", headers=OPS).json() == []
