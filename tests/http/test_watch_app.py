"""The watcher (``app.watch``) beside the app that takes events, in one process on one
SQLite file, with in-memory log ends: what the taker writes, the watcher shows, and
between them they export every per-group series once. The same as real processes on the
real broker: ``tests/e2e/test_watcher.py``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.adapters.watcher.told import encode_told
from spark_offset_sidecar.app import create_app
from spark_offset_sidecar.app.watch import create_watch_app
from spark_offset_sidecar.core.lag.group_memory import GroupMemory
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.ledger.state import GroupCounters
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.ports.watcher import TOLD_MEMORY, Told
from spark_offset_sidecar.testing import InMemoryCommitter, InMemoryLogEnds
from tests.support.app import post_progress, settings_for
from tests.support.service import metric, wait_for

GROUP = "orders-app"
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def test_the_watcher_follows_what_the_taker_writes(tmp_path: Path) -> None:
    ends = InMemoryLogEnds({P0: 100, P1: 40})
    taker_settings = settings_for(tmp_path, watcher="separate")
    watcher_settings = settings_for(tmp_path, lag_read_interval_seconds=0.05)
    taker = create_app(taker_settings, committer=InMemoryCommitter(), log_ends=ends)
    with TestClient(taker) as events:
        watcher = create_watch_app(watcher_settings, log_ends=ends)
        with TestClient(watcher) as readers:
            assert post_progress(events, 1, {"orders": {"0": 60, "1": 40}}).status_code == 200
            wait_for(
                lambda: readers.get(f"/v1/status/{GROUP}").json().get("totallag") == 40,
                what="the watcher's lag of the group",
            )
            assert post_progress(events, 2, {"orders": {"0": 100, "1": 40}}).status_code == 200
            wait_for(
                lambda: readers.get(f"/v1/status/{GROUP}").json().get("totallag") == 0,
                what="the watcher's lag at 0",
            )
            listed = readers.get("/v1/status").json()["groups"]
            assert [g["group"] for g in listed] == [GROUP]
            assert readers.get("/ui").status_code == 200
            assert readers.get("/readyz").status_code == 200
            assert readers.get("/livez").text == "ok\n"
            # Events go to the taker only; readers to the watcher only.
            assert events.get(f"/v1/status/{GROUP}").status_code == 404
            assert readers.post("/v1/progress", json={}).status_code in (404, 405)
            lag = ("sidecar_consumergroup_lag", {"consumergroup": GROUP, "topic": "orders"})
            watched = wait_for(  # as of the last evaluation (a status is evaluated now)
                lambda: (
                    (t := readers.get("/metrics").text) and metric(t, lag[0], **lag[1]) == 0 and t
                ),
                what="the watcher's lag series at 0",
            )
            taken = events.get("/metrics").text
    succeeded = "sidecar_commits_succeeded_total"
    assert metric(taken, succeeded, consumergroup=GROUP) == 2
    assert metric(watched, succeeded, consumergroup=GROUP) is None
    assert metric(taken, "sidecar_consumergroup_lag", consumergroup=GROUP, topic="orders") is None
    reads = "sidecar_log_end_reads_total"  # the lag monitor's reads: the watcher's only
    assert (metric(watched, reads, result="succeeded") or 0) >= 2
    assert metric(taken, reads, result="succeeded") is None


def test_a_watcher_never_migrates(tmp_path: Path) -> None:
    watcher = create_watch_app(settings_for(tmp_path), log_ends=InMemoryLogEnds({}))
    with pytest.raises(StoreUnavailable, match="a watcher never migrates"), TestClient(watcher):
        pass


def test_a_child_watcher_answers_with_what_its_service_told_it(tmp_path: Path) -> None:
    """``told=True`` (a service's child): a group's failures, its commit in flight and
    what that waits for, as told, are in its status; a body that is not a told memory is
    refused with the reason, and so is a message from an address other than loopback
    (only a child's socket or its pod's processes tell a watcher), and one that is not
    whole before a whole one was taken."""
    ends = InMemoryLogEnds({P0: 100, P1: 40})
    taker = create_app(
        settings_for(tmp_path, watcher="separate"), committer=InMemoryCommitter(), log_ends=ends
    )
    with TestClient(taker) as events:
        assert post_progress(events, 1, {"orders": {"0": 60, "1": 40}}).status_code == 200
        watcher = create_watch_app(settings_for(tmp_path), log_ends=ends, told=True)
        with (
            TestClient(watcher) as outside,  # an address of another machine
            TestClient(watcher, client=("127.0.0.1", 50000)) as readers,
        ):
            query = events.get("/v1/queries").json()[0]["query_id"]
            checkpoint = Checkpoint(query, GROUP, 1, "run-1", {P0: 60, P1: 40}, 1.0)
            memory = GroupMemory(
                failures=3,
                retry_at=0.0,
                last_failure="coordinator_not_available",
                counters=GroupCounters(failed=Counter(coordinator_not_available=3)),
                in_flight=CommitRequest(checkpoint, checkpoint.offsets, 4),
                waiting="broker 2 (127.0.0.1:1) cannot be reached",
            )
            partial = encode_told(Told({GROUP: memory}))
            whole = encode_told(Told({GROUP: memory}, whole=True))
            refused = outside.post(TOLD_MEMORY, content=whole)
            assert refused.status_code == 403, refused.text
            assert "loopback" in refused.text
            refused = readers.post(TOLD_MEMORY, content=partial)
            assert refused.status_code == 409, refused.text
            assert "whole" in refused.text
            assert readers.get(f"/v1/status/{GROUP}").json()["consecutive_failures"] == 0
            answer = readers.post(TOLD_MEMORY, content=whole)
            assert answer.status_code == 204, answer.text
            assert readers.post(TOLD_MEMORY, content=partial).status_code == 204
            seen = readers.get(f"/v1/status/{GROUP}").json()
            assert seen["commit_waiting"] == memory.waiting
            assert seen["consecutive_failures"] == 3
            assert seen["status"] == "ERR"
            refused = readers.post(TOLD_MEMORY, content=b'{"version": 99}')
            assert refused.status_code == 400
            assert "told version 99" in refused.text


def test_a_watcher_with_a_token_is_told_by_whoever_shows_it_and_by_no_one_else(
    tmp_path: Path,
) -> None:
    """SIDECAR_WATCHER_TOKEN_FILE: a watcher in a pod of its own is told from any address
    by a teller that shows the token (the service's ``WatcherAt`` sends it), and refused
    (401, naming the variable) without it, with another one, or with it under another
    scheme, from loopback too; a refusal takes nothing (the status stays as it was)."""
    secret = tmp_path / "watcher-token"
    secret.write_text("a-secret-of-the-pod-s-two-containers\n")  # stripped, as a Secret's file
    ends = InMemoryLogEnds({P0: 100, P1: 40})
    taker = create_app(
        settings_for(tmp_path, watcher="separate"), committer=InMemoryCommitter(), log_ends=ends
    )
    with TestClient(taker) as events:
        assert post_progress(events, 1, {"orders": {"0": 60, "1": 40}}).status_code == 200
        watcher = create_watch_app(
            settings_for(tmp_path, watcher_token_file=secret), log_ends=ends, told=True
        )
        with (
            TestClient(watcher) as outside,  # an address of another machine
            TestClient(watcher, client=("127.0.0.1", 50000)) as beside,
        ):
            memory = GroupMemory(
                failures=3,
                retry_at=0.0,
                last_failure="request_timed_out",
                counters=GroupCounters(failed=Counter(request_timed_out=3)),
                in_flight=None,
            )
            whole = encode_told(Told({GROUP: memory}, whole=True))
            for client, shown in (
                (outside, None),
                (outside, "Bearer a-secret-of-the-pod-s-two-containers-and-more"),
                (outside, "Bearer a-secret-of-the-pod-s-two-container"),
                (outside, "Basic a-secret-of-the-pod-s-two-containers"),
                (beside, None),
            ):
                headers = {"authorization": shown} if shown else {}
                refused = client.post(TOLD_MEMORY, content=whole, headers=headers)
                assert refused.status_code == 401, (shown, refused.text)
                assert "SIDECAR_WATCHER_TOKEN_FILE" in refused.text
            assert outside.get(f"/v1/status/{GROUP}").json()["consecutive_failures"] == 0
            shown = {"authorization": "Bearer a-secret-of-the-pod-s-two-containers"}
            answer = outside.post(TOLD_MEMORY, content=whole, headers=shown)
            assert answer.status_code == 204, answer.text
            assert outside.get(f"/v1/status/{GROUP}").json()["consecutive_failures"] == 3
