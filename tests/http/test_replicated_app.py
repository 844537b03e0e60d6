"""The replicated service's start-up and shutdown (lifespan) on a real PostgreSQL: the
first lease round before ready, the groups handed back on a clean stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select

from spark_offset_sidecar.adapters.sql.schema import consumer_groups, replicas
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.errors import ConfigError
from spark_offset_sidecar.settings import (
    CommitSettings,
    DatabaseSettings,
    ReplicaSettings,
    Settings,
)
from spark_offset_sidecar.testing import InMemoryCommitter, MemoryKafka
from tests.support.app import doubles
from tests.support.service import metric, spark_progress, wait_for


def _rows(url: str) -> tuple[list[Any], list[Any]]:
    engine = create_engine(url)
    with engine.connect() as conn:
        found = (
            conn.execute(select(replicas.c.replica_id)).all(),
            conn.execute(select(consumer_groups.c.group_id, consumer_groups.c.owner_id)).all(),
        )
    engine.dispose()
    return found


def test_a_replica_claims_new_groups_commits_them_and_hands_them_back_on_stop(
    postgres_server: Any,
) -> None:
    postgres_server.reset()
    settings = Settings(
        database=DatabaseSettings(url=postgres_server.url),
        # A lease that no stall of a loaded machine outlasts: with 3 s, a renewal late by
        # 3 s lost the group for a moment, and the scrape below saw none owned.
        replicas=ReplicaSettings(replicated=True, lease_seconds=30.0),
        commits=CommitSettings(commit_timeout_seconds=10.0),
    )
    committer = InMemoryCommitter()
    app = create_app(settings, doubles(settings, MemoryKafka(committer=committer)))
    with TestClient(app) as client:
        (replica,), groups = _rows(postgres_server.url)
        assert groups == []
        answer = client.post(
            "/v1/progress",
            json={"group_id": "g", "progress": spark_progress(0, {"t": {"0": 5}})},
        )
        assert answer.json()["outcome"] == "accepted"
        wait_for(lambda: committer.commits, timeout=60, what="the commit")
        (request,) = committer.commits
        assert (request.group_id, request.fence) == ("g", 1)
        assert _rows(postgres_server.url)[1] == [("g", replica[0])]
        scraped = client.get("/metrics").text
        assert metric(scraped, "sidecar_groups_owned") == 1.0
        for step in ("reach", "lock", "load", "fence", "write", "notify", "commit"):
            spent = metric(scraped, "sidecar_store_step_cpu_seconds_total", step=step)
            assert spent is not None, step
            assert spent >= 0, step
    assert _rows(postgres_server.url) == ([], [("g", None)])


def test_replicas_need_postgresql_and_a_lease_of_three_commit_timeouts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="SIDECAR_DATABASE_URL"):
        Settings(
            database=DatabaseSettings(url=f"sqlite:///{tmp_path}/x.db"),
            replicas=ReplicaSettings(replicated=True),
        )
    url = "postgresql+psycopg://sidecar@127.0.0.1/postgres"
    with pytest.raises(ConfigError, match="SIDECAR_LEASE_SECONDS"):
        Settings(
            database=DatabaseSettings(url=url),
            replicas=ReplicaSettings(replicated=True, lease_seconds=20),
            commits=CommitSettings(commit_timeout_seconds=10),
        )
    one = Settings(commits=CommitSettings(commit_timeout_seconds=30))
    assert one.replicas.lease_seconds == 30  # one replica: no lease
