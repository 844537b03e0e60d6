"""The watcher in a process of its own (``offset-sidecar watch``) beside the service that
takes events (``SIDECAR_WATCH_IN_PROCESS=false``), on one real SQLite file and the real
broker: the watcher follows what the service writes and shows each group's lag as Kafka
has it; each process exports its own share of ``/metrics``, none twice."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.service_process import ServiceProcess
from tests.support.kafka import log_ends, produce, run_sync, unique_group
from tests.support.service import metric, spark_progress, wait_for

pytestmark = pytest.mark.kafka


@pytest.fixture
def pair(tmp_path: Path, kafka_bootstrap: str) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    """The service taking events, then its watcher on the same database."""
    service = ServiceProcess(
        tmp_path, kafka_bootstrap, commit_timeout_seconds=5, watch_in_process="false"
    ).start()
    watcher = ServiceProcess(
        tmp_path, kafka_bootstrap, command="watch", lag_read_interval_seconds=1
    )
    try:
        yield service, watcher.start()
    finally:
        watcher.stop()
        service.stop()


def test_the_watcher_shows_the_lag_of_what_the_service_commits(
    pair: tuple[ServiceProcess, ServiceProcess],
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
) -> None:
    service, watcher = pair
    topic = new_topic(partitions=2)
    run_sync(produce(kafka_bootstrap, topic, 60))
    ends = log_ends(kafka_bootstrap, [topic])
    group = unique_group("watched")
    half = {topic: {str(p): end // 2 for (_, p), end in ends.items()}}
    answer = service.post_progress(group, spark_progress(1, half))
    assert answer.status_code == 200, answer.text
    behind = sum(end - end // 2 for end in ends.values())

    def status() -> dict[str, object] | None:
        found = watcher.http.get(f"/v1/status/{group}")
        return found.json() if found.status_code == 200 else None

    seen = wait_for(
        lambda: (s := status()) and s["totallag"] == behind and s,
        timeout=30,
        what=f"the watcher's lag of {group} at {behind}",
    )
    assert seen["last_commit_at"] is not None  # committed by the service, read from the store

    caught_up = {topic: {str(p): end for (_, p), end in ends.items()}}
    assert service.post_progress(group, spark_progress(2, caught_up)).status_code == 200
    wait_for(
        lambda: (s := status()) and s["totallag"] == 0,
        timeout=30,
        what=f"the watcher's lag of {group} at 0",
    )

    # Readers are the watcher's; each process exports its share of the group's series.
    assert service.http.get(f"/v1/status/{group}").status_code == 404
    assert service.http.get("/ui").status_code == 404
    taken, watched = service.metrics(), watcher.metrics()
    succeeded = "sidecar_commits_succeeded_total"
    assert (metric(taken, succeeded, consumergroup=group) or 0) >= 1
    assert metric(watched, succeeded, consumergroup=group) is None
    assert metric(watched, "sidecar_consumergroup_lag", consumergroup=group, topic=topic) == 0
    assert metric(taken, "sidecar_consumergroup_lag", consumergroup=group, topic=topic) is None
    assert metric(watched, "sidecar_pending_checkpoints", consumergroup=group) == 0
    assert metric(taken, "sidecar_pending_checkpoints", consumergroup=group) is None
    assert watcher.http.get("/ui").status_code == 200


def test_a_watcher_on_a_database_never_migrated_refuses_to_start_and_says_why(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """From a cold start (an empty folder): the watcher never migrates."""
    watcher = ServiceProcess(tmp_path, kafka_bootstrap, command="watch")
    done = subprocess.run(
        [sys.executable, "-m", "spark_offset_sidecar.cli", "watch"],
        cwd=tmp_path,
        env=watcher.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "a watcher never migrates" in done.stderr + done.stdout
