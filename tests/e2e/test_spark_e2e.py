"""The whole loop on real components: PySpark reads real topics through Spark's Kafka
connector, the listener reports each batch, the service commits, and the group's offsets
are read back from the broker."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.kafka_broker import LocalBroker
from harness.machine import free_port
from harness.service_process import ServiceProcess
from spark_offset_listener.listener import OffsetCommitListener
from tests.support.kafka import (
    committed_offsets,
    create_topics,
    produce,
    run_sync,
    unique_group,
)
from tests.support.service import wait_for
from tests.support.spark_queries import last_end_offsets, run_available_now

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture
def listener_for(spark: Any) -> Iterator[Callable[..., OffsetCommitListener]]:
    added: list[OffsetCommitListener] = []

    def add(url: str, group: str) -> OffsetCommitListener:
        listener = OffsetCommitListener(url, group_id=group, flush_timeout=2.0, timeout=2.0)
        spark.streams.addListener(listener)
        added.append(listener)
        return listener

    yield add
    for listener in added:
        spark.streams.removeListener(listener)
        listener.sender.close(0.5)


def test_two_kafka_sources_committed_exactly_and_restart_continues(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    listener_for: Callable[..., OffsetCommitListener],
) -> None:
    orders, payments = new_topic(3), new_topic(2)
    run_sync(produce(kafka_bootstrap, orders, 900))
    run_sync(produce(kafka_bootstrap, payments, 400))
    group = unique_group("spark")
    service = ServiceProcess(tmp_path, kafka_bootstrap).start()
    try:
        listener = listener_for(service.url, group)
        first = run_available_now(spark, kafka_bootstrap, [orders, payments], tmp_path)
        ends = last_end_offsets(first)
        assert sum(v for (t, _), v in ends.items() if t == orders) == 900
        assert sum(v for (t, _), v in ends.items() if t == payments) == 400
        assert len(ends) == 5, "every partition of both sources"
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, what="commit")
        assert first.lastProgress["batchId"] >= 2, "maxOffsetsPerTrigger made several batches"
        assert listener.events >= 3
        first_view = service.query(str(first.id))
        assert first_view["counters"]["events"]["accepted"] >= 1

        # Restart from the same checkpoint: same query id, new run id, batch ids continue.
        run_sync(produce(kafka_bootstrap, orders, 300, start=900))
        second = run_available_now(spark, kafka_bootstrap, [orders, payments], tmp_path)
        assert second.id == first.id
        assert second.runId != first.runId
        assert second.lastProgress["batchId"] > first.lastProgress["batchId"]
        ends = last_end_offsets(second)
        assert sum(v for (t, _), v in ends.items() if t == orders) == 1200
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, what="commit")
        view = service.query(str(second.id))
        assert view["run_id"] == str(second.runId)
        assert view["committed"]["checkpoint_id"] == second.lastProgress["batchId"]
    finally:
        service.stop()


def test_spark_runs_on_while_the_service_is_down_and_commits_when_it_returns(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    listener_for: Callable[..., OffsetCommitListener],
) -> None:
    topic = new_topic(2)
    run_sync(produce(kafka_bootstrap, topic, 600))
    group = unique_group("spark")
    port = free_port()
    listener = listener_for(f"http://127.0.0.1:{port}", group)
    query = run_available_now(spark, kafka_bootstrap, [topic], tmp_path)
    ends = last_end_offsets(query)
    assert sum(ends.values()) == 600, "Spark processed everything with the service down"
    assert query.exception() is None
    assert committed_offsets(kafka_bootstrap, group) == {}
    assert listener.sender.stats.delivered == 0

    service = ServiceProcess(tmp_path, kafka_bootstrap, port=port).start()
    try:
        wait_for(
            lambda: committed_offsets(kafka_bootstrap, group) == ends, timeout=60, what="commit"
        )
        assert listener.sender.stats.delivered >= 1
        assert listener.sender.stats.retries >= 1
    finally:
        service.stop()


def test_lost_checkpoint_restarts_from_the_groups_offsets_without_loss_or_repeats(
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    listener_for: Callable[..., OffsetCommitListener],
) -> None:
    topic, group = new_topic(3), unique_group("spark")
    run_sync(produce(kafka_bootstrap, topic, 500))
    service = ServiceProcess(tmp_path, kafka_bootstrap).start()
    try:
        listener_for(service.url, group)
        first = run_available_now(spark, kafka_bootstrap, [topic], tmp_path, output="before")
        ends = last_end_offsets(first)
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == ends, what="commit")

        run_sync(produce(kafka_bootstrap, topic, 300, start=500))
        shutil.rmtree(tmp_path / "checkpoint")  # the disaster
        answer = service.http.get(f"/v1/groups/{group}/starting-offsets")
        assert answer.status_code == 200, answer.text
        recovery = answer.json()
        assert recovery["starting_offsets"] == {topic: {str(p): o for (_, p), o in ends.items()}}
        assert service.http.delete(f"/v1/queries/{first.id}").status_code == 200

        # A new query (new id, batch ids from 0) writes to a new path: the old path's
        # _spark_metadata already holds batch ids 0..N, which the file sink would skip.
        second = run_available_now(
            spark,
            kafka_bootstrap,
            [topic],
            tmp_path,
            output="after",
            starting_offsets=recovery["spark_option"],
        )
        assert second.id != first.id
        before = spark.read.parquet(str(tmp_path / "before")).select("partition", "offset")
        after = spark.read.parquet(str(tmp_path / "after")).select("partition", "offset")
        assert after.count() == 300, "exactly the records after the committed offsets"
        both = before.union(after)
        assert both.count() == 800, "no record lost"
        assert both.distinct().count() == 800, "no record repeated"
        final = last_end_offsets(second)
        wait_for(lambda: committed_offsets(kafka_bootstrap, group) == final, what="commit")
    finally:
        service.stop()


def test_a_job_naming_its_cluster_is_committed_on_that_cluster(
    spark: Any,
    kafka_bootstrap: str,
    private_broker: LocalBroker,
    tmp_path: Path,
) -> None:
    """A real job reads a topic of a second cluster ("eu", a brand-new broker) and names it
    to its listener (``cluster="eu"``): the service, whose default cluster is the session's
    broker ("main"), commits the group on eu alone, and its status says so."""
    eu = private_broker.bootstrap
    topic, group = "cluster-orders", unique_group("spark-eu")
    run_sync(create_topics(eu, [topic], 2))
    run_sync(produce(eu, topic, 600))
    service = ServiceProcess(
        tmp_path,
        kafka_bootstrap,
        kafka_cluster_name="main",
        kafka_clusters="eu",
        cluster_eu_kafka_bootstrap_servers=eu,
    ).start()
    listener = OffsetCommitListener(
        service.url, group_id=group, cluster="eu", flush_timeout=2.0, timeout=2.0
    )
    spark.streams.addListener(listener)
    try:
        query = run_available_now(spark, eu, [topic], tmp_path)
        ends = last_end_offsets(query)
        assert sum(ends.values()) == 600
        wait_for(lambda: committed_offsets(eu, group) == ends, what="the commit on eu")
        assert committed_offsets(kafka_bootstrap, group) == {}, "nothing on main"
        view = service.query(str(query.id))
        assert view["cluster"] == "eu"
        assert view["committed"]["checkpoint_id"] == query.lastProgress["batchId"]
    finally:
        spark.streams.removeListener(listener)
        listener.sender.close(0.5)
        service.stop()
