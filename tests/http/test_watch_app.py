"""The watcher (``app.watch``) beside the app that takes events, in one process on one
SQLite file, with in-memory log ends: what the taker writes, the watcher shows, and what
it is told, it takes. The service and its child as real processes on the real broker,
every series exported once between them: ``tests/e2e/test_watcher.py``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.adapters.watcher.memory_update import encode_memory_update
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.app.watch import create_watch_app, open_database
from spark_offset_sidecar.core.lag.group_memory import GroupMemory, memory_of
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.ledger.state import GroupCounters
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import StoreUnavailable
from spark_offset_sidecar.ports.watcher import MEMORY_UPDATES, MemoryUpdate
from spark_offset_sidecar.testing import InMemoryLogEnds, MemoryKafka
from spark_offset_sidecar.topology import Topology
from tests.support.app import doubles, post_progress, settings_for
from tests.support.service import metric, wait_for

GROUP = "orders-app"
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
SERVED = Topology.resolve(replicated=False, database="sqlite:///sidecar.db")


def test_the_watcher_follows_what_the_taker_writes(tmp_path: Path) -> None:
    ends = InMemoryLogEnds({P0: 100, P1: 40})
    taker_settings = settings_for(tmp_path)
    watcher_settings = settings_for(tmp_path, lag_read_interval_seconds=0.05)
    taker = create_app(taker_settings, doubles(taker_settings, MemoryKafka(log_ends=ends)))
    with TestClient(taker) as events:
        watcher = create_watch_app(
            watcher_settings, SERVED, MemoryKafka(log_ends=ends), open_database
        )
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
            # Events go to the taker only.
            assert readers.post("/v1/progress", json={}).status_code in (404, 405)
            lag = ("sidecar_consumergroup_lag", {"consumergroup": GROUP, "topic": "orders"})
            watched = wait_for(  # as of the last evaluation (a status is evaluated now)
                lambda: (
                    (t := readers.get("/metrics").text) and metric(t, lag[0], **lag[1]) == 0 and t
                ),
                what="the watcher's lag series at 0",
            )
            shared = readers.get("/metrics/watched").text
    succeeded = "sidecar_commits_succeeded_total"  # the memory of the process taking events
    assert metric(watched, succeeded, consumergroup=GROUP) is None
    reads = "sidecar_log_end_reads_total"  # the lag monitor's reads
    assert (metric(watched, reads, result="succeeded") or 0) >= 2
    assert metric(shared, "sidecar_consumergroup_lag", consumergroup=GROUP, topic="orders") == 0
    invalid = "sidecar_events_invalid_total"  # a process-wide series: its own, not shared
    assert metric(watched, invalid, reason="validation") == 0
    assert metric(shared, invalid, reason="validation") is None


def test_a_watcher_never_migrates(tmp_path: Path) -> None:
    kafka = MemoryKafka(log_ends=InMemoryLogEnds({}))
    watcher = create_watch_app(settings_for(tmp_path), SERVED, kafka, open_database)
    with pytest.raises(StoreUnavailable, match="a watcher never migrates"), TestClient(watcher):
        pass


def test_a_child_watcher_answers_with_what_its_service_told_it(tmp_path: Path) -> None:
    """A group's failures, its commit in flight and what that waits for, as told, are in
    its status; a body that is not a memory update is refused with the reason, and so is
    one that is not whole before a whole one was taken."""
    ends = InMemoryLogEnds({P0: 100, P1: 40})
    settings = settings_for(tmp_path)
    taker = create_app(settings, doubles(settings, MemoryKafka(log_ends=ends)))
    with TestClient(taker) as events:
        assert post_progress(events, 1, {"orders": {"0": 60, "1": 40}}).status_code == 200
        watcher = create_watch_app(settings, SERVED, MemoryKafka(log_ends=ends), open_database)
        with TestClient(watcher) as readers:
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
            partial = encode_memory_update(MemoryUpdate({GROUP: memory}))
            whole = encode_memory_update(MemoryUpdate({GROUP: memory}, whole=True))
            refused = readers.post(MEMORY_UPDATES, content=partial)
            assert refused.status_code == 409, refused.text
            assert "whole" in refused.text
            assert readers.get(f"/v1/status/{GROUP}").json()["consecutive_failures"] == 0
            answer = readers.post(MEMORY_UPDATES, content=whole)
            assert answer.status_code == 204, answer.text
            assert readers.post(MEMORY_UPDATES, content=partial).status_code == 204
            seen = readers.get(f"/v1/status/{GROUP}").json()
            assert seen["commit_waiting"] == memory.waiting
            assert seen["consecutive_failures"] == 3
            assert seen["status"] == "ERR"
            refused = readers.post(MEMORY_UPDATES, content=b'{"groups": {}}')
            assert refused.status_code == 400
            assert "not a memory update" in refused.text


def test_a_watcher_started_again_shows_no_counter_until_told_so_none_goes_back(
    tmp_path: Path,
) -> None:
    """A group's counters are the memory of the process taking events, which the store
    does not hold: a watcher started again (its child restarted) exports them once told,
    never the 0 of the group it read from the store (a counter going back is a reset to
    Prometheus), then the teller's values, as the first one did."""
    ends = InMemoryLogEnds({P0: 100, P1: 40})
    settings = settings_for(tmp_path)
    succeeded, accepted = "sidecar_commits_succeeded_total", {"outcome": "accepted"}
    taker = create_app(settings, doubles(settings, MemoryKafka(log_ends=ends)))
    with TestClient(taker) as events:
        assert post_progress(events, 1, {"orders": {"0": 60, "1": 40}}).status_code == 200
        wait_for(
            lambda: metric(events.get("/metrics").text, succeeded, consumergroup=GROUP) == 1,
            what="the commit counted",
        )
        group = taker.state.runtime.started.durable.ledger.groups[GROUP]
        whole = MemoryUpdate({GROUP: memory_of(group, None, None)}, whole=True)
        for start in ("first", "started again"):
            watcher = create_watch_app(settings, SERVED, MemoryKafka(log_ends=ends), open_database)
            with TestClient(watcher) as readers:
                share = readers.get("/metrics/watched").text
                assert metric(share, "sidecar_pending_checkpoints", consumergroup=GROUP) == 0
                assert metric(share, succeeded, consumergroup=GROUP) is None, start
                assert metric(share, "sidecar_events_total", **accepted) is None, start
                told = readers.post(MEMORY_UPDATES, content=encode_memory_update(whole))
                assert told.status_code == 204, told.text
                share = wait_for(  # a build is kept SIDECAR_METRICS_MAX_AGE_SECONDS
                    lambda: (
                        (t := readers.get("/metrics/watched").text)
                        and metric(t, succeeded, consumergroup=GROUP) is not None
                        and t
                    ),
                    what="the counters told",
                )
                assert metric(share, succeeded, consumergroup=GROUP) == 1, start
                assert metric(share, "sidecar_events_total", consumergroup=GROUP, **accepted) == 1
