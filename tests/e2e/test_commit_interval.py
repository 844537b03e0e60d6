"""A minimum commit interval (ledger R13) on the real service and broker: a group is
committed at most once per interval, always with its newest offsets; its own interval,
set through the API, overrides the default; a shutdown commits what waits."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.service_process import ServiceProcess
from tests.support.kafka import committed_offsets, unique_group, wait_for_committed
from tests.support.service import counted_metrics, metric, spark_progress, wait_for

pytestmark = pytest.mark.kafka


@pytest.fixture
def service(tmp_path: Path, kafka_bootstrap: str) -> Iterator[ServiceProcess]:
    process = ServiceProcess(tmp_path, kafka_bootstrap, min_commit_interval_seconds=1)
    yield process.start()
    process.stop()


def _post(service: ServiceProcess, group: str, batch: int, topic: str) -> None:
    event = spark_progress(batch, {topic: {"0": batch}}, query=f"q-{group}")
    answer = service.post_progress(group, event)
    assert (answer.status_code, answer.json()["outcome"]) == (200, "accepted"), answer.text


def test_a_group_is_committed_at_most_once_an_interval_with_its_newest_offsets(
    service: ServiceProcess, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(1), unique_group("interval")
    started = time.monotonic()
    for batch in range(40):  # 2 s of batches every 50 ms
        _post(service, group, batch, topic)
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    wait_for_committed(kafka_bootstrap, [group], {(topic, 0): 39})
    text = counted_metrics(service.http, f"q-{group}", group)
    succeeded = metric(text, "sidecar_commits_succeeded_total", consumergroup=group) or 0
    skipped = metric(text, "sidecar_commits_skipped_total", consumergroup=group) or 0
    assert succeeded <= elapsed / 1.0 + 2, f"{succeeded} commits in {elapsed:.1f} s"
    assert succeeded + skipped == 40, "every checkpoint committed or counted skipped"
    # Absent once the store's last step is read (a watcher follows the store): no
    # checkpoint waits (a series that is zero is not exported).
    wait_for(
        lambda: (
            metric(service.metrics(), "sidecar_commit_behind_checkpoints", consumergroup=group)
            is None
        ),
        what="no checkpoint behind",
    )
    view = service.query(f"q-{group}")
    assert (view["commit_interval_seconds"], view["committed_behind_checkpoints"]) == (1.0, 0)


def test_a_groups_own_interval_and_a_shutdown_that_commits_what_waits(
    service: ServiceProcess, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(1), unique_group("own-interval")
    unknown = service.http.put(f"/v1/groups/{group}/commit-interval", json={"seconds": 60})
    assert unknown.status_code == 404, "no group before its first event"
    _post(service, group, 0, topic)
    wait_for_committed(kafka_bootstrap, [group], {(topic, 0): 0})  # the first does not wait
    for bad in ({"seconds": -1}, {"seconds": 3601}, {"seconds": "soon"}, {}):
        answer = service.http.put(f"/v1/groups/{group}/commit-interval", json=bad)
        assert answer.status_code == 422, (bad, answer.text)
    answer = service.http.put(f"/v1/groups/{group}/commit-interval", json={"seconds": 60})
    assert (answer.status_code, answer.json()["outcome"]) == (200, "accepted"), answer.text
    _post(service, group, 1, topic)
    _post(service, group, 2, topic)
    # Past the default interval, within the group's own: a group on the default, its
    # second batch posted now, is committed at the earliest an interval later.
    marker, marker_topic = unique_group("default-interval"), new_topic(1)
    _post(service, marker, 0, marker_topic)
    wait_for_committed(kafka_bootstrap, [marker], {(marker_topic, 0): 0})
    _post(service, marker, 1, marker_topic)
    wait_for_committed(kafka_bootstrap, [marker], {(marker_topic, 0): 1})
    assert committed_offsets(kafka_bootstrap, group) == {(topic, 0): 0}
    view = service.query(f"q-{group}")
    assert (view["commit_interval_seconds"], view["committed_behind_checkpoints"]) == (60.0, 2)
    text = wait_for(  # as of the store's last step read
        lambda: (
            metric(t := service.metrics(), "sidecar_commit_behind_checkpoints", consumergroup=group)
            == 2
            and t
        ),
        what="2 checkpoints behind on /metrics",
    )
    assert (metric(text, "sidecar_commit_behind_seconds", consumergroup=group) or 0) >= 1.0
    service.stop()  # SIGTERM: a graceful shutdown
    assert committed_offsets(kafka_bootstrap, group) == {(topic, 0): 2}, "flushed at shutdown"
    service.start()  # the interval is the group's own, kept in the database
    assert service.query(f"q-{group}")["commit_interval_seconds"] == 60.0
