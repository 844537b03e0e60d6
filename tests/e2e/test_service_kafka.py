"""The service as a process against the real broker; the group read back with the admin
client, as lag tools read it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient

from harness.kafka_broker import LocalBroker
from harness.machine import free_port
from harness.service_process import ServiceProcess
from tests.support.cli import offset_sidecar
from tests.support.kafka import (
    committed_offsets,
    create_topics,
    read_committed,
    run_sync,
    unique_group,
)
from tests.support.service import (
    QUERY,
    counted_metrics,
    metric,
    metric_sum,
    spark_progress,
    wait_for,
)

pytestmark = pytest.mark.kafka


@pytest.fixture
def service(tmp_path: Path, kafka_bootstrap: str) -> Iterator[ServiceProcess]:
    process = ServiceProcess(tmp_path, kafka_bootstrap, commit_timeout_seconds=5)
    yield process.start()
    process.stop()


def offsets_of(topic: str, *values: int) -> dict[str, dict[str, int]]:
    return {topic: {str(p): v for p, v in enumerate(values)}}


def expect(topic: str, *values: int) -> dict[tuple[str, int], int]:
    return {(topic, p): v for p, v in enumerate(values)}


def only_the_marker_commits(
    service: ServiceProcess, bootstrap: str, group: str, topic: str, batch: int, *offsets: int
) -> None:
    """Nothing posted before batch ``batch`` (at ``offsets``, one a partition) commits
    any more: that batch, posted now, is committed, and it is the group's one commit
    since (a commit the earlier event made would count a second)."""
    succeeded = "sidecar_commits_succeeded_total"
    before = metric_sum(counted_metrics(service.http, QUERY, group), succeeded, consumergroup=group)
    assert service.post_progress(
        group, spark_progress(batch, offsets_of(topic, *offsets))
    ).is_success
    wait_for(lambda: committed_offsets(bootstrap, group) == expect(topic, *offsets), what="marker")
    wait_for(
        lambda: metric_sum(service.metrics(), succeeded, consumergroup=group) >= before + 1,
        what="the marker's commit counted",
    )
    assert metric_sum(service.metrics(), succeeded, consumergroup=group) == before + 1


def test_newest_completed_checkpoint_is_committed_exactly_with_metadata(
    service: ServiceProcess, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(3), unique_group()
    for batch in range(4):
        answer = service.post_progress(
            group, spark_progress(batch, offsets_of(topic, *[batch * 10 + p for p in range(3)]))
        )
        assert answer.status_code == 200, answer.text
    want = expect(topic, 30, 31, 32)  # Spark's endOffset as is: no +1
    wait_for(lambda: committed_offsets(kafka_bootstrap, group) == want, what="offsets")
    raw = run_sync(read_committed(kafka_bootstrap, group))
    metadata = json.loads(raw[(topic, 0)][1])
    assert metadata == {"committer": "spark-offset-sidecar", "query_id": QUERY, "batch_id": 3}

    # An older completion after the newer one changes nothing.
    late = service.post_progress(group, spark_progress(1, offsets_of(topic, 10, 11, 12)))
    assert late.json()["outcome"] == "stale"
    assert committed_offsets(kafka_bootstrap, group) == want
    only_the_marker_commits(service, kafka_bootstrap, group, topic, 4, 40, 41, 42)
    text = service.metrics()
    assert metric(text, "sidecar_events_total", consumergroup=group, outcome="stale") == 1


def test_unknown_checkpoint_is_reported_and_a_second_query_is_refused(
    service: ServiceProcess, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(1), unique_group()
    assert service.post_progress(group, spark_progress(5, offsets_of(topic, 50))).status_code == 200
    wait_for(lambda: committed_offsets(kafka_bootstrap, group) == expect(topic, 50))

    unknown = service.http.post(f"/v1/queries/{QUERY}/checkpoints/99/complete")
    assert unknown.status_code == 404
    assert unknown.json()["outcome"] == "unknown_checkpoint"

    intruder = service.post_progress(
        group, spark_progress(6, offsets_of(topic, 1), query="q-other")
    )
    assert intruder.status_code == 409
    assert "belongs to query" in intruder.json()["detail"]
    assert committed_offsets(kafka_bootstrap, group) == expect(topic, 50)
    only_the_marker_commits(service, kafka_bootstrap, group, topic, 7, 70)
    text = service.metrics()
    assert (
        metric(text, "sidecar_events_total", consumergroup=group, outcome="unknown_checkpoint") == 1
    )
    assert metric(text, "sidecar_events_total", consumergroup=group, outcome="conflict") == 1


def test_slow_commit_coalesces_completions_into_one_commit_of_the_newest(
    tmp_path: Path, private_broker: LocalBroker, new_topic: Callable[..., str]
) -> None:
    bootstrap = private_broker.bootstrap
    group, topic = unique_group(), f"slow-{unique_group()}"
    run_sync(create_topics(bootstrap, [topic], 1))  # the private broker has none
    service = ServiceProcess(tmp_path, bootstrap, commit_timeout_seconds=30).start()
    try:
        assert (
            service.post_progress(group, spark_progress(0, offsets_of(topic, 1))).status_code == 200
        )
        wait_for(lambda: committed_offsets(bootstrap, group) == expect(topic, 1))
        # Kafka holds the commit a moment before the service has its answer: paused in
        # between, the answer never comes and batch 0 stays in flight.
        wait_for(
            lambda: (
                (view := service.query(QUERY))["in_flight"] is None
                and (view["committed"] or {}).get("checkpoint_id") == 0
            ),
            what="batch 0 recorded as committed",
        )

        private_broker.pause()
        try:
            for batch in range(1, 8):
                answer = service.post_progress(
                    group, spark_progress(batch, offsets_of(topic, batch * 100))
                )
                assert answer.status_code == 200, "the service answers while Kafka hangs"
                time.sleep(0.2)
            view = service.query(QUERY)
            assert view["in_flight"]["checkpoint_id"] == 1
            assert view["slot"]["checkpoint_id"] == 7
        finally:
            private_broker.resume()

        wait_for(lambda: committed_offsets(bootstrap, group) == expect(topic, 700), what="newest")
        labels = {"consumergroup": group}
        # Kafka holds the commit a moment before the service has recorded its success.
        wait_for(
            lambda: (
                (view := service.query(QUERY))["in_flight"] is None
                and view["committed"]["checkpoint_id"] == 7
            ),
            what="the last commit recorded",
        )
        text = counted_metrics(service.http, QUERY, group)
        assert metric(text, "sidecar_commit_in_flight", **labels) is None  # absent: none
        assert metric(text, "sidecar_commits_succeeded_total", **labels) == 3  # batches 0, 1, 7
        assert metric(text, "sidecar_commits_skipped_total", **labels) == 5  # batches 2..6
        assert metric(text, "sidecar_commits_failed_total", **labels) == 0
    finally:
        service.stop()


def test_killed_right_after_2xx_and_restarted_still_commits(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(2), unique_group()
    nowhere = f"127.0.0.1:{free_port()}"  # first life: no Kafka, so nothing can be committed
    service = ServiceProcess(tmp_path, nowhere, commit_timeout_seconds=2)
    service.start()
    answer = service.post_progress(group, spark_progress(12, offsets_of(topic, 120, 121)))
    assert answer.status_code == 200
    service.kill()
    assert committed_offsets(kafka_bootstrap, group) == {}

    service.start(kafka_bootstrap_servers=kafka_bootstrap)
    try:
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == expect(topic, 120, 121))
        assert service.query(QUERY)["committed"]["checkpoint_id"] == 12
    finally:
        service.stop()


def test_a_group_with_active_members_gets_a_clear_failure_reason(
    service: ServiceProcess, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(1), unique_group()

    async def join_and_hold() -> AIOKafkaConsumer:
        member = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group)
        await member.start()
        await member.getmany(timeout_ms=3000)  # joined, partitions assigned
        return member

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    member = asyncio.run_coroutine_threadsafe(join_and_hold(), loop).result(30)
    try:
        service.post_progress(group, spark_progress(0, offsets_of(topic, 5)))
        view = wait_for(
            lambda: (v := service.query(QUERY))["last_failure"] and v, what="a failed commit"
        )
        assert view["last_failure"] == "group_has_members"
        failed = wait_for(  # counted on /metrics once the watcher is told (a second)
            lambda: metric(
                service.metrics(),
                "sidecar_commits_failed_by_reason_total",
                consumergroup=group,
                reason="group_has_members",
            ),
            what="the failure counted",
        )
        assert failed >= 1
    finally:
        asyncio.run_coroutine_threadsafe(member.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
    # Once the member left, the retry (no new event needed) commits.
    wait_for(lambda: committed_offsets(kafka_bootstrap, group) == expect(topic, 5), timeout=60)


def test_a_topic_that_does_not_exist_is_named_and_not_created(
    service: ServiceProcess, kafka_bootstrap: str
) -> None:
    group, topic = unique_group(), f"missing-{unique_group()}"
    service.post_progress(group, spark_progress(0, offsets_of(topic, 5)))
    view = wait_for(
        lambda: (v := service.query(QUERY))["last_failure"] and v, what="a failed commit"
    )
    assert view["last_failure"] == "unknown_topic_or_partition"
    assert committed_offsets(kafka_bootstrap, group) == {}
    assert topic not in run_sync(topic_names(kafka_bootstrap)), "committing created no topic"


async def topic_names(bootstrap: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return list(await admin.list_topics())
    finally:
        await admin.close()


def test_starting_offsets_from_the_groups_committed_offsets_api_and_cli(
    service: ServiceProcess, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, other, group = new_topic(3), new_topic(2), unique_group()
    progress = spark_progress(4, {topic: {"0": 40, "1": 41}})  # partition 2 never committed
    assert service.post_progress(group, progress).status_code == 200
    wait_for(lambda: committed_offsets(kafka_bootstrap, group) == {(topic, 0): 40, (topic, 1): 41})

    answer = service.http.get(f"/v1/groups/{group}/starting-offsets").json()
    assert answer["starting_offsets"] == {topic: {"0": 40, "1": 41, "2": -2}}
    assert answer["uncommitted_partitions"] == [f"{topic}/2"]
    assert json.loads(answer["spark_option"]) == answer["starting_offsets"]

    with_other = service.http.get(
        f"/v1/groups/{group}/starting-offsets", params={"topic": [topic, other]}
    ).json()
    assert with_other["starting_offsets"][other] == {"0": -2, "1": -2}

    bad_topic = service.http.get(
        f"/v1/groups/{group}/starting-offsets", params={"topic": "no/slashes"}
    )
    assert bad_topic.status_code == 422
    assert bad_topic.json()["errors"][0]["field"] == "topic"

    missing = service.http.get(f"/v1/groups/{unique_group()}/starting-offsets")
    assert missing.status_code == 404
    assert "no committed offsets" in missing.json()["detail"]

    cli = offset_sidecar(kafka_bootstrap, "starting-offsets", group, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == {topic: {"0": 40, "1": 41, "2": -2}}
    assert f"{topic}/2" in cli.stderr


def test_an_idle_groups_offsets_are_committed_again_before_retention_drops_them(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(1), unique_group("idle")
    service = ServiceProcess(tmp_path, kafka_bootstrap, recommit_idle_after_seconds=2).start()
    try:
        service.post_progress(group, spark_progress(9, offsets_of(topic, 90)))
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == expect(topic, 90))

        def refreshed() -> float:
            found = metric(
                service.metrics(), "sidecar_commits_refreshed_total", consumergroup=group
            )
            return found or 0.0

        def commits() -> float:
            """Every commit of the service (its one group), on its own series: at once,
            where the group's counters come with the memory its watcher is told."""
            found = metric(service.metrics(), "sidecar_commit_duration_seconds_count")
            return found or 0.0

        # The query is idle (no event arrives): three refreshes come, and no more often than
        # every 2 s over the time they took (a window the clock measures, not a guess).
        started, before = time.monotonic(), commits()
        after = wait_for(lambda: (n := commits()) >= before + 3 and n, timeout=30)
        took = time.monotonic() - started
        assert after - before <= took / 2 + 1, f"{after - before} refreshes in {took:.1f} s"
        wait_for(lambda: refreshed() >= 3, timeout=30, what="the refreshes counted as such")
        assert committed_offsets(kafka_bootstrap, group) == expect(topic, 90), "unchanged"
        raw = run_sync(read_committed(kafka_bootstrap, group))
        assert json.loads(raw[(topic, 0)][1])["batch_id"] == 9
    finally:
        service.stop()


def test_a_read_naming_an_unknown_topic_creates_no_topic(
    service: ServiceProcess, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """The test broker auto-creates topics (Kafka's default): a Metadata request that
    allowed it (aiokafka's default) would create the topic a read only named."""
    topic, group, typo = new_topic(1), unique_group(), f"typo-{uuid.uuid4().hex[:8]}"
    assert service.post_progress(group, spark_progress(1, {topic: {"0": 5}})).status_code == 200
    wait_for(lambda: committed_offsets(kafka_bootstrap, group) == {(topic, 0): 5})
    answer = service.http.get(f"/v1/groups/{group}/starting-offsets", params={"topic": typo})
    assert answer.status_code == 404, answer.text
    assert f"topic {typo!r} is unknown to Kafka" in answer.json()["detail"]

    async def topics() -> list[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            return await admin.list_topics()  # all topics: creates none
        finally:
            await admin.close()

    assert topic in run_sync(topics())
    assert typo not in run_sync(topics()), "a read created the topic it named"
