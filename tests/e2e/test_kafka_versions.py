"""The commit path, ``describe-group``, lag and status on each Kafka release users run:
every minor line on Maven Central, from 4.4 (the suite's default, the newest) down to 4.0
(which removed old protocol versions), and 3.9 (the last with ZooKeeper, what many clusters
still run). Each broker is started for this module's tests of its version, in an empty
folder (KRaft, jars from Maven Central): the service's test runs first, so its first
commit also meets a brand-new coordinator; then, on the same broker, the contract of the
one door below aiokafka's public API with the newest aiokafka
(``tests/e2e/test_aiokafka_contract.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import kafka_broker
from harness.machine import free_port
from harness.service_process import ServiceProcess
from tests.e2e.test_aiokafka_contract import check_the_door
from tests.support.cli import describe_group
from tests.support.kafka import committed_offsets, create_topics, produce, run_sync, unique_group
from tests.support.service import metric, spark_progress, wait_for

pytestmark = pytest.mark.kafka

VERSIONS = ["4.4.0", "4.3.1", "4.2.2", "4.1.1", "4.0.2", "3.9.1"]


# One broker start per version for all of its tests, in the order written (pytest groups
# them by version, xdist_group keeps a version's tests on one worker).
@pytest.fixture(
    scope="module",
    params=[
        pytest.param(v, id=f"kafka-{v}", marks=pytest.mark.xdist_group(f"kafka-{v}"))
        for v in VERSIONS
    ],
)
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[kafka_broker.LocalBroker]:
    local = kafka_broker.brand_new(tmp_path_factory.mktemp("kafka"), request.param)
    yield local
    local.stop()


def test_commits_describe_group_lag_and_status_on_this_kafka(
    broker: kafka_broker.LocalBroker, tmp_path: Path
) -> None:
    bootstrap, topic, group = broker.bootstrap, f"orders-{free_port()}", unique_group("versions")
    run_sync(create_topics(bootstrap, [topic], 2))
    run_sync(produce(bootstrap, topic, 40))  # keys spread them over both partitions
    service = ServiceProcess(
        tmp_path, bootstrap, export_kafka_lag="true", lag_read_interval_seconds=1
    ).start()
    try:
        assert describe_group(bootstrap, group) == [], "nothing committed, no topic named"
        first = {"0": 5, "1": 5}
        progress = spark_progress(0, {topic: first}, query=f"q-{group}")
        assert service.post_progress(group, progress).status_code == 200
        wait_for(
            lambda: committed_offsets(bootstrap, group) == {(topic, 0): 5, (topic, 1): 5},
            timeout=60,
            what="the first commit",
        )
        rows = describe_group(bootstrap, group)
        assert [(r[1], r[2], r[3]) for r in rows] == [(topic, "0", "5"), (topic, "1", "5")]
        log_ends = {int(r[2]): int(r[4]) for r in rows}
        assert sum(log_ends.values()) == 40
        assert [int(r[5]) for r in rows] == [log_ends[0] - 5, log_ends[1] - 5]

        def lagging_status() -> Any:
            status = service.http.get(f"/v1/status/{group}").json()
            return status if status.get("totallag") == 30 else None

        assert wait_for(lagging_status, what="the status with lag 30")["status"] in {"OK", "WARN"}
        caught_up = {"0": log_ends[0], "1": log_ends[1]}
        progress = spark_progress(1, {topic: caught_up}, query=f"q-{group}")
        assert service.post_progress(group, progress).status_code == 200
        wait_for(
            lambda: (
                committed_offsets(bootstrap, group)
                == {(topic, 0): log_ends[0], (topic, 1): log_ends[1]}
            ),
            what="the second commit",
        )
        assert [r[5] for r in describe_group(bootstrap, group)] == ["0", "0"]

        def ok_with_zero_lag() -> bool:
            status = service.http.get(f"/v1/status/{group}").json()
            text = service.metrics()
            lag = metric(text, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic)
            return status["status"] == "OK" and status["totallag"] == 0 and lag == 0

        wait_for(ok_with_zero_lag, what="status OK and the exported lag 0")
    finally:
        service.stop()


@pytest.mark.parametrize("which", ["newest", "pinned"])
def test_the_door_on_this_aiokafka_and_kafka(which: str, broker: kafka_broker.LocalBroker) -> None:
    check_the_door(which, broker.bootstrap)
