"""Status and lag in the running app: ``GET /v1/status``, the status metric and the optional
kafka_exporter-named series. In-process, with in-memory log ends and committer (the same
against the real broker and Burrow is in ``test_lag_tools.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import BrokerUnavailable, KafkaReadError
from spark_offset_sidecar.testing import InMemoryCommitter, InMemoryLogEnds, MemoryKafka
from tests.support.app import doubles, post_progress, settings_for
from tests.support.service import metric, wait_for

GROUP = "orders-app"
FAST = {"lag_read_interval_seconds": 0.05}


def running(
    tmp_path: Path, ends: InMemoryLogEnds, committer: InMemoryCommitter, **overrides: Any
) -> TestClient:
    settings = settings_for(tmp_path, **FAST, **overrides)
    return TestClient(
        create_app(settings, doubles(settings, MemoryKafka(committer=committer, log_ends=ends)))
    )


def status_of(client: TestClient, group: str = GROUP) -> Any:
    answer = client.get(f"/v1/status/{group}")
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture
def ends() -> InMemoryLogEnds:
    return InMemoryLogEnds({TopicPartition("orders", 0): 50, TopicPartition("orders", 1): 7})


def test_status_lists_groups_with_lag_from_the_log_ends(
    tmp_path: Path, ends: InMemoryLogEnds
) -> None:
    with running(tmp_path, ends, InMemoryCommitter()) as client:
        post_progress(client, 1, {"orders": {"0": 40, "1": 7}})
        listed = wait_for(
            lambda: [g for g in client.get("/v1/status").json()["groups"] if g["totallag"]],
            what="a status with the lag",
        )
        assert [(g["group"], g["status"], g["totallag"]) for g in listed] == [(GROUP, "OK", 10)]
        one = status_of(client)
        assert one["maxlag"]["partition"] == 0
        assert one["maxlag"]["current_lag"] == 10
        assert one["partitions"][1]["log_end_offset"] == 7
        assert one["partition_count"] == 2
        assert client.get("/v1/status/nobody").status_code == 404
        text = client.get("/metrics").text
        assert metric(text, "sidecar_consumergroup_status", consumergroup=GROUP, status="OK") == 1
        # One series per group, its current status: ERR is absent, not 0.
        assert (
            metric(text, "sidecar_consumergroup_status", consumergroup=GROUP, status="ERR") is None
        )
        assert metric(text, "sidecar_consumergroup_lag", consumergroup=GROUP, topic="orders") == 10
        # Partition 0 lags and its record's time is not known (no history, no reader):
        # the topic's time lag is unknown, never the 0 s of its caught-up partition 1.
        assert metric(text, "sidecar_consumergroup_lag_seconds", consumergroup=GROUP) is None
        assert metric(text, "sidecar_log_end_reads_total", result="succeeded") >= 1  # type: ignore[operator]
        # kafka_exporter's series are off by default (no double counting beside it).
        assert "kafka_consumergroup_lag" not in text


def test_kafka_exporter_series_when_switched_on(tmp_path: Path, ends: InMemoryLogEnds) -> None:
    with running(tmp_path, ends, InMemoryCommitter(), export_kafka_lag=True) as client:
        post_progress(client, 1, {"orders": {"0": 40, "1": 5}})
        at = {"consumergroup": GROUP, "topic": "orders"}
        text = wait_for(
            lambda: (
                (t := client.get("/metrics").text)
                and metric(t, "kafka_consumergroup_lag_sum", **at) == 12
                and t
            ),
            what="kafka_consumergroup_lag_sum",
        )
        assert metric(text, "kafka_consumergroup_lag", partition="0", **at) == 10
        assert metric(text, "kafka_consumergroup_lag", partition="1", **at) == 2
        assert metric(text, "kafka_consumergroup_current_offset", partition="0", **at) == 40
        assert metric(text, "kafka_consumergroup_current_offset_sum", **at) == 45


def test_repeated_failures_make_the_group_err_and_a_success_clears_it(
    tmp_path: Path, ends: InMemoryLogEnds
) -> None:
    committer = InMemoryCommitter()
    committer.fail_with = BrokerUnavailable("broker down")
    with running(
        tmp_path, ends, committer, retry_initial_seconds=0.01, retry_max_seconds=0.02
    ) as client:
        post_progress(client, 1, {"orders": {"0": 40, "1": 7}})
        # The first commit fails before anything was committed: no partitions yet, but ERR.
        failing = wait_for(lambda: status_of(client)["status"] == "ERR", what="ERR")
        assert failing
        assert status_of(client)["consecutive_failures"] >= 3
        committer.fail_with = None
        wait_for(lambda: status_of(client)["status"] == "OK", what="OK again")
        wait_for(lambda: status_of(client)["totallag"] == 10, what="the lag, at the next read")


def test_a_commit_held_by_an_unreachable_coordinator_says_so_in_the_status(
    tmp_path: Path, ends: InMemoryLogEnds
) -> None:
    """The committer's word on a commit in flight (``OffsetCommitter.waiting``) is the
    group's ``commit_waiting`` in its status, its query's state and the page, while the
    commit is in flight, and gone once it is answered."""
    committer = InMemoryCommitter()
    committer.gate.clear()  # the commit stays in flight
    why = "its coordinator, broker 2, cannot be reached for 4 s"
    committer.waits[GROUP] = why
    with running(tmp_path, ends, committer) as client:
        post_progress(client, 1, {"orders": {"0": 40, "1": 7}})
        wait_for(lambda: status_of(client)["commit_waiting"] == why, what="the status to say it")
        (query,) = client.get("/v1/queries").json()
        assert query["in_flight"] is not None
        assert query["commit_waiting"] == why
        assert client.get(f"/v1/queries/{query['query_id']}").json()["commit_waiting"] == why
        wait_for(lambda: f"commit waits: {why}" in client.get("/ui").text, what="the page")
        committer.gate.set()
        wait_for(lambda: status_of(client)["commit_waiting"] is None, what="the wait to end")
        assert client.get("/v1/queries").json()[0]["commit_waiting"] is None


def test_a_failing_read_keeps_the_service_up_and_leaves_lag_unknown(tmp_path: Path) -> None:
    ends = InMemoryLogEnds(fail_with=KafkaReadError("brokers unreachable"))
    with running(tmp_path, ends, InMemoryCommitter()) as client:
        post_progress(client, 1, {"orders": {"0": 40}})
        wait_for(lambda: ends.reads >= 3, what="reads")
        one = status_of(client)
        assert (one["status"], one["totallag"]) == ("OK", None)
        text = client.get("/metrics").text
        assert metric(text, "sidecar_log_end_reads_total", result="failed") >= 2  # type: ignore[operator]
        assert metric(text, "sidecar_log_end_read_timestamp_seconds") == 0
        assert client.get("/livez").status_code == 200
        assert client.get("/readyz").status_code == 200
