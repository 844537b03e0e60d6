"""Every path that looks up a group coordinator, each as the very first look-up on a
broker started in an empty folder. A brand-new Kafka creates ``__consumer_offsets`` on the
first FindCoordinator and answers COORDINATOR_NOT_AVAILABLE, then
COORDINATOR_LOAD_IN_PROGRESS, until it is led: each path must wait (with a bound), not
fail. (``test_demo.py`` runs the whole demo the same way.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.kafka_broker import LocalBroker
from harness.service_process import ServiceProcess
from spark_offset_sidecar.adapters.kafka.committer import KafkaOffsetCommitter
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.offsets import TopicPartition
from tests.support.cli import offset_sidecar
from tests.support.kafka import committed_offsets, create_topics, run_sync, unique_group

pytestmark = pytest.mark.kafka


def _first_look_up(broker: LocalBroker) -> None:
    assert not (broker.state_dir / "data" / "__consumer_offsets-0").exists(), "not brand-new"


@pytest.mark.parametrize("path", ["describe-group", "starting-offsets", "route", "commit"])
def test_the_first_coordinator_look_up_on_a_brand_new_broker_waits(
    path: str, private_broker: LocalBroker, tmp_path: Path
) -> None:
    bootstrap, group, topic = private_broker.bootstrap, unique_group("cold"), "cold"
    run_sync(create_topics(bootstrap, [topic], 2))  # the controller's work: no coordinator
    _first_look_up(private_broker)
    if path == "describe-group":
        described = offset_sidecar(bootstrap, "describe-group", group, "--topic", topic)
        assert described.returncode == 0, described.stderr
        assert f"Consumer group '{group}' has no active members." in described.stdout
        rows = [line.split() for line in described.stdout.splitlines()[3:]]
        assert rows == [[group, topic, "0", "-", "0", "0"], [group, topic, "1", "-", "0", "0"]]
    elif path == "starting-offsets":
        found = offset_sidecar(bootstrap, "starting-offsets", group, "--topic", topic)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout) == {topic: {"0": -2, "1": -2}}
    elif path == "route":
        service = ServiceProcess(tmp_path, bootstrap).start()
        try:
            answer = service.http.get(
                f"/v1/groups/{group}/starting-offsets", params={"topic": topic}
            )
        finally:
            service.stop()
        assert answer.status_code == 200, answer.text
        assert answer.json()["starting_offsets"] == {topic: {"0": -2, "1": -2}}
    else:
        offsets = {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0}
        checkpoint = Checkpoint("q", group, 0, None, offsets, 0.0)

        async def first_commit() -> None:
            committer = KafkaOffsetCommitter({"bootstrap_servers": bootstrap}, timeout=30)
            try:
                await committer.commit(CommitRequest(checkpoint, offsets, attempt=1))
            finally:
                await committer.close()

        run_sync(first_commit())
        assert committed_offsets(bootstrap, group) == {(topic, 0): 0, (topic, 1): 0}
