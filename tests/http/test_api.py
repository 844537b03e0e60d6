"""The HTTP API in-process: real FastAPI app, real SQLite file, lifespan run by TestClient.

The committer here is the in-memory one (these tests are about the API's answers); the
same flows against the real broker are in ``test_service_kafka.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import spark_offset_sidecar.app.start as start_module
import spark_offset_sidecar.app.watching as watching
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.settings import CommitSettings, DatabaseSettings, Settings
from spark_offset_sidecar.testing import InMemoryCommitter, InMemoryStore, MemoryKafka
from tests.support.app import doubles, post_progress, settings_for
from tests.support.service import QUERY, metric, wait_for
from tests.support.watcher import watchers_of


@pytest.fixture
def committer() -> InMemoryCommitter:
    return InMemoryCommitter()


@pytest.fixture
def client(tmp_path: Path, committer: InMemoryCommitter) -> Iterator[TestClient]:
    settings = settings_for(tmp_path, max_body_bytes=64_000)
    app = create_app(settings, doubles(settings, MemoryKafka(committer=committer)))
    with TestClient(app) as test_client:
        yield test_client


# The tests on the module's unchanging app (made once) run on one worker.
ON_UNCHANGING = pytest.mark.xdist_group("http-api-unchanging")


@pytest.fixture(scope="module")
def unchanging(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One app for the module's tests whose requests change nothing (each refused, or a
    read): each asserts that nothing was stored."""
    settings = settings_for(tmp_path_factory.mktemp("unchanging"), max_body_bytes=64_000)
    with TestClient(create_app(settings, doubles(settings))) as test_client:
        yield test_client


def committed(client: TestClient, query: str = QUERY) -> Any:
    return client.get(f"/v1/queries/{query}").json()["committed"]


def test_progress_is_committed_and_shown_in_state_and_metrics(
    client: TestClient, committer: InMemoryCommitter
) -> None:
    answer = post_progress(client, 3, {"orders": {"0": 10, "1": 2**40}})
    assert answer.status_code == 200
    assert answer.json()["outcome"] == "accepted"
    assert answer.json()["checkpoint_id"] == 3
    state = wait_for(lambda: committed(client), what="commit")
    assert state["checkpoint_id"] == 3
    assert state["offsets"] == {"orders": {"0": 10, "1": 2**40}}
    assert len(committer.commits) == 1
    view = client.get(f"/v1/queries/{QUERY}").json()
    assert view["group_id"] == "orders-app"
    assert view["counters"]["commits_succeeded"] == 1
    assert [q["query_id"] for q in client.get("/v1/queries").json()] == [QUERY]
    group = {"consumergroup": "orders-app"}
    text = wait_for(  # the watcher follows the database a step behind
        lambda: (
            (t := client.get("/metrics").text)
            and metric(t, "sidecar_pending_checkpoints", **group) is not None
            and metric(t, "sidecar_commits_succeeded_total", **group) == 1  # told: a second
            and t
        ),
        what="the watcher's share of /metrics with the group and its commit",
    )
    assert metric(text, "sidecar_commits_succeeded_total", **group) == 1
    assert metric(text, "sidecar_events_total", outcome="accepted", **group) == 1
    # Counters stand at 0 from the group's first event, so that its first failure or skip
    # is a step increase() sees; a reason or an outcome appears with its first count.
    assert metric(text, "sidecar_commits_skipped_total", **group) == 0
    assert metric(text, "sidecar_commits_failed_total", **group) == 0
    assert metric(text, "sidecar_pending_checkpoints", **group) == 0  # the watcher's share
    assert metric(text, "sidecar_commits_failed_by_reason_total", **group) is None
    assert metric(text, "sidecar_events_total", outcome="stale", **group) is None
    # Per-partition series only when asked for (SIDECAR_METRICS_GRANULARITY=partition).
    assert metric(text, "sidecar_committed_offset", **group) is None
    assert metric(text, "sidecar_commit_duration_seconds_count") == 1  # all groups
    last = metric(text, "sidecar_last_successful_commit_timestamp_seconds", **group)
    assert last == pytest.approx(state["at"], abs=0.0005)  # seconds to the millisecond
    metrics = text
    assert "sidecar_build_info{" in metrics


def test_outcomes_and_status_codes(client: TestClient) -> None:
    assert post_progress(client, 5, {"t": {"0": 50}}).json()["outcome"] == "accepted"
    duplicate = post_progress(client, 5, {"t": {"0": 50}})
    assert (duplicate.status_code, duplicate.json()["outcome"]) == (200, "duplicate")
    stale = post_progress(client, 4, {"t": {"0": 40}})
    assert (stale.status_code, stale.json()["outcome"]) == (200, "stale")
    assert "older than completed checkpoint 5" in stale.json()["detail"]
    ignored = client.post(
        "/v1/progress",
        json={"group_id": "g", "progress": {"id": "other", "batchId": 0, "sources": []}},
    )
    assert (ignored.status_code, ignored.json()["outcome"]) == (200, "ignored")

    other_query = post_progress(client, 9, {"t": {"0": 90}}, query="q-2")
    assert other_query.status_code == 409
    assert f"belongs to query {QUERY}" in other_query.json()["detail"]
    moved = post_progress(client, 6, {"t": {"0": 60}}, group="another-group")
    assert moved.status_code == 409

    unknown = client.post(f"/v1/queries/{QUERY}/checkpoints/77/complete")
    assert (unknown.status_code, unknown.json()["outcome"]) == (404, "unknown_checkpoint")
    nobody = client.post("/v1/queries/nobody/checkpoints/1/complete")
    assert (nobody.status_code, nobody.json()["outcome"]) == (404, "unknown_query")
    assert client.get("/v1/queries/nobody").status_code == 404
    wait_for(lambda: committed(client), what="commit")
    assert committed(client)["offsets"] == {"t": {"0": 50}}


def test_flink_style_snapshot_then_complete(client: TestClient) -> None:
    body = {"checkpoint_id": 1, "group_id": "g", "offsets": {"t": {"0": 5}}, "run_id": "r"}
    assert client.post("/v1/queries/q/checkpoints", json=body).json()["outcome"] == "accepted"
    body2 = {**body, "checkpoint_id": 2, "offsets": {"t": {"0": 9}}}
    assert client.post("/v1/queries/q/checkpoints", json=body2).status_code == 200
    assert client.get("/v1/queries/q").json()["pending_checkpoints"] == [1, 2]
    again = client.post("/v1/queries/q/checkpoints", json={**body, "offsets": {"t": {"0": 6}}})
    assert (again.status_code, again.json()["outcome"]) == (409, "conflict")
    done = client.post("/v1/queries/q/checkpoints/2/complete")
    assert done.json()["outcome"] == "accepted"
    assert client.get("/v1/queries/q").json()["pending_checkpoints"] == []
    assert wait_for(lambda: committed(client, "q"))["offsets"] == {"t": {"0": 9}}
    late = client.post("/v1/queries/q/checkpoints/1/complete")
    assert (late.status_code, late.json()["outcome"]) == (200, "stale")


def test_release_lets_a_new_query_take_the_group(client: TestClient) -> None:
    post_progress(client, 3, {"t": {"0": 30}})
    assert client.delete(f"/v1/queries/{QUERY}").json()["outcome"] == "accepted"
    assert post_progress(client, 0, {"t": {"0": 31}}, query="new-id").status_code == 200
    assert client.delete("/v1/queries/nobody").status_code == 404


@ON_UNCHANGING
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"checkpoint_id": 1, "group_id": "g", "offsets": {"t": {"0": "5"}}}, "offsets.t.0"),
        ({"checkpoint_id": 1, "group_id": "g", "offsets": {"t": {"0": 5.5}}}, "offsets.t.0"),
        ({"checkpoint_id": 1, "group_id": "g", "offsets": {"t": {"0": -5}}}, "offsets"),
        ({"checkpoint_id": 1, "group_id": "g", "offsets": {"t": {"x": 5}}}, "offsets"),
        ({"checkpoint_id": 1, "group_id": "g", "offsets": {"a/b": {"0": 5}}}, "offsets"),
        ({"checkpoint_id": 1, "group_id": "g", "offsets": {}}, "offsets"),
        ({"checkpoint_id": -1, "group_id": "g", "offsets": {"t": {"0": 5}}}, "checkpoint_id"),
        ({"checkpoint_id": "1", "group_id": "g", "offsets": {"t": {"0": 5}}}, "checkpoint_id"),
        ({"checkpoint_id": 1, "group_id": "", "offsets": {"t": {"0": 5}}}, "group_id"),
        ({"checkpoint_id": 1, "offsets": {"t": {"0": 5}}}, "group_id"),
        ({"checkpoint_id": 1, "group_id": "g", "offsets": {"t": {"0": 5}}, "x": 1}, "x"),
    ],
)
def test_invalid_checkpoints_get_422_naming_the_field(
    unchanging: TestClient, body: dict[str, Any], field: str
) -> None:
    answer = unchanging.post("/v1/queries/q/checkpoints", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["outcome"] == "invalid"
    assert any(e["field"].startswith(field) for e in answer.json()["errors"]), answer.json()
    assert unchanging.get("/v1/queries/q").status_code == 404, "nothing was stored"
    assert unchanging.get("/v1/queries").json() == [], "nothing was stored"


def test_malformed_empty_huge_and_deep_bodies_are_4xx(client: TestClient) -> None:
    url = "/v1/progress"
    headers = {"content-type": "application/json"}
    assert client.post(url, content=b"", headers=headers).status_code == 422
    assert client.post(url, content=b"{not json", headers=headers).status_code == 422
    assert client.post(url, content=b"[1, 2]", headers=headers).status_code == 422
    huge = client.post(url, content=b'{"x": "' + b"a" * 70_000 + b'"}', headers=headers)
    assert huge.status_code == 413
    assert "SIDECAR_MAX_BODY_BYTES" in huge.json()["detail"]
    deep = b'{"group_id": "g", "progress": ' + b"[" * 25_000 + b"]" * 25_000 + b"}"
    assert len(deep) < 64_000
    assert 400 <= client.post(url, content=deep, headers=headers).status_code < 500
    bad_progress = client.post(url, json={"group_id": "g", "progress": {"batchId": 1}})
    assert bad_progress.status_code == 422
    assert bad_progress.json()["errors"][0]["field"] == "progress.id"
    assert (
        metric(client.get("/metrics").text, "sidecar_events_invalid_total", reason="too_large") == 1
    )


@ON_UNCHANGING
def test_openapi_documents_the_contract(unchanging: TestClient) -> None:
    paths = unchanging.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/progress",
        "/v1/queries/{query_id}/checkpoints",
        "/v1/queries/{query_id}/checkpoints/{checkpoint_id}/complete",
        "/v1/queries",
        "/v1/queries/{query_id}",
        "/metrics",
        "/livez",
        "/readyz",
    ):
        assert path in paths
    assert unchanging.get("/docs").status_code == 200


def test_start_up_and_shutdown(tmp_path: Path) -> None:
    committer = InMemoryCommitter()
    settings = settings_for(tmp_path)
    app = create_app(settings, doubles(settings, MemoryKafka(committer=committer)))
    with TestClient(app) as client:
        assert client.get("/readyz").status_code == 200
        assert client.get("/livez").status_code == 200
        runtime = app.state.runtime
        assert runtime.running is not None
        assert not runtime.running.commit_task.done()
    assert not runtime.ready
    assert runtime.running.commit_task.done(), "the lifespan stops the commit loop"
    assert (tmp_path / "sidecar.db").exists()


class _Closing(InMemoryCommitter):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class _ClosingStore(InMemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_failure_while_starting_stops_what_had_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last step of the start fails: the commit loop, the watcher (its lag monitor),
    the memory relay, the committer and the ledger that had started are stopped, as at
    shutdown, and routes never see a service half started."""

    def fails(*_args: object) -> None:
        raise RuntimeError("the last step of the start fails")

    monkeypatch.setattr(start_module, "warn_of_dropped_clusters", fails)
    background: dict[str, asyncio.Task[None]] = {}
    commits: list[asyncio.Task[None]] = []
    run_in_background, stop_commits = watching.run_in_background, start_module.stop_commits

    def recorded(stack: AsyncExitStack, work: Coroutine[Any, Any, None], name: str) -> Any:
        background[name] = run_in_background(stack, work, name)
        return background[name]

    async def recorded_stop(loop: Any, task: asyncio.Task[None], grace: float) -> None:
        await stop_commits(loop, task, grace)
        commits.append(task)

    monkeypatch.setattr(start_module, "run_in_background", recorded)
    monkeypatch.setattr(start_module, "stop_commits", recorded_stop)
    committer, store = _Closing(), _ClosingStore()
    settings = settings_for(tmp_path)
    parts = doubles(settings, MemoryKafka(committer=committer), store=store)
    app = create_app(settings, parts)
    with pytest.raises(RuntimeError, match="the last step"), TestClient(app):
        pass
    runtime = app.state.runtime
    assert not runtime.ready
    assert runtime.running is None, "routes never saw a service half started"
    assert len(commits) == 1, "the commit loop was stopped"
    assert commits[0].done(), "the commit loop stopped"
    assert background["watcher"].done(), "the watcher's supervision stopped"
    assert background["memory relay"].done(), "the memory relay stopped"
    (watcher,) = watchers_of(parts).made
    assert not watcher.running, "the watcher (its lag monitor) stopped"
    assert committer.closed, "the committer closed"
    assert store.closed, "the ledger's store closed"


def test_a_store_double_keeps_followed_folders_and_the_rest_works(tmp_path: Path) -> None:
    """A store double keeps its followed folders in memory (every database the service
    opens keeps them): the folder routes, events, statuses and /ui work."""
    settings = settings_for(tmp_path)
    app = create_app(settings, doubles(settings, store=InMemoryStore()))
    with TestClient(app) as client:
        answer = client.get("/v1/followed-folders")
        assert answer.status_code == 200
        assert answer.json() == []
        assert post_progress(client, 1, {"t": {"0": 1}}).json()["outcome"] == "accepted"
        assert client.get("/v1/status").status_code == 200
        assert client.get("/ui").status_code == 200


def test_store_unavailable_answers_503_and_changes_nothing(tmp_path: Path) -> None:
    store = InMemoryStore()
    settings = settings_for(tmp_path)
    app = create_app(settings, doubles(settings, store=store))
    with TestClient(app) as client:
        store.fail_with = StoreUnavailable("disk full")
        answer = post_progress(client, 1, {"t": {"0": 1}})
        assert answer.status_code == 503
        assert answer.headers["retry-after"] == "1"
        assert "disk full" in answer.json()["detail"]
        assert client.get("/v1/queries").json() == []
        assert client.get("/readyz").status_code == 503
        store.fail_with = None
        assert post_progress(client, 1, {"t": {"0": 1}}).json()["outcome"] == "accepted"
        assert "sidecar_store_unavailable_total 1.0" in client.get("/metrics").text


def test_restart_commits_what_was_accepted_but_not_committed(database_url: str) -> None:
    stuck = InMemoryCommitter()
    stuck.gate.clear()  # the commit never finishes in the first life
    settings = Settings(
        database=DatabaseSettings(url=database_url),
        commits=CommitSettings(shutdown_grace_seconds=0.2),
    )
    with TestClient(
        create_app(settings, doubles(settings, MemoryKafka(committer=stuck)))
    ) as client:
        post_progress(client, 1, {"t": {"0": 10}})
        post_progress(client, 2, {"t": {"0": 20}})
        wait_for(lambda: stuck.in_flight == 1, what="a commit in flight")
    assert stuck.commits == []

    fresh = InMemoryCommitter()
    with TestClient(
        create_app(settings, doubles(settings, MemoryKafka(committer=fresh)))
    ) as client:
        state = wait_for(lambda: committed(client), what="commit after restart")
        assert state["offsets"] == {"t": {"0": 20}}
        assert state["checkpoint_id"] == 2
        assert post_progress(client, 1, {"t": {"0": 10}}).json()["outcome"] == "stale"
    assert [c.checkpoint_id for c in fresh.commits] == [2]


def test_commit_results_survive_restart(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    with TestClient(create_app(settings, doubles(settings))) as client:
        post_progress(client, 4, {"t": {"0": 40}})
        wait_for(lambda: committed(client), what="commit")
    again = InMemoryCommitter()
    with TestClient(
        create_app(settings, doubles(settings, MemoryKafka(committer=again)))
    ) as client:
        view = client.get(f"/v1/queries/{QUERY}").json()
        assert view["committed"]["offsets"] == {"t": {"0": 40}}
        assert view["slot"] is None
        assert view["last_completed_checkpoint"] == 4
    assert again.commits == [], "nothing to commit again"
    assert json.loads(json.dumps(view))["run_id"] == "run-1"
