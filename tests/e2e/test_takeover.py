"""Know, not assume, after a takeover (ledger R12): two real replicas on a real PostgreSQL
and the real broker. The owner of some groups freezes (SIGSTOP: it neither renews its
leases nor commits), and a commit of its lands in Kafka late, moving one group back to
older offsets, as a delayed commit of the old owner would. The other replica takes the
groups, reads their offsets back from Kafka, finds the one that moved, counts and logs
it, and commits the stored offsets again; the other groups it took are left alone."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from harness.replica_cluster import ReplicaCluster
from spark_offset_sidecar.adapters.kafka.committer import KafkaOffsetCommitter
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.offsets import TopicPartition
from tests.support.kafka import committed_offsets, run_sync, unique_group
from tests.support.service import metric, spark_progress, wait_for

pytestmark = pytest.mark.kafka

SETTINGS: dict[str, Any] = {
    "lease_seconds": 6.0,
    "commit_timeout_seconds": 2.0,  # also how long after a takeover the read-back waits
    "lag_read_interval_seconds": 60,
}


@pytest.fixture
def pair(tmp_path: Path, kafka_bootstrap: str, postgres_server: Any) -> Any:
    postgres_server.reset()
    replicas = ReplicaCluster(tmp_path, kafka_bootstrap, postgres_server.url, 2, **SETTINGS)
    yield replicas.start()
    for replica in replicas.replicas.values():
        if replica.process is not None and replica.process.poll() is None:
            replica.kill()  # a stopped process takes SIGKILL, not SIGTERM


def late_commit(bootstrap: str, group: str, topic: str, offset: int, writer: str) -> None:
    """What a delayed commit of the old owner does to Kafka: the product's own committer,
    with the old owner's replica id, commits older offsets."""
    tp = TopicPartition(topic, 0)
    checkpoint = Checkpoint(f"q-{group}", group, 1, "run-1", {tp: offset}, 0.0)
    request = CommitRequest(checkpoint, {tp: offset}, attempt=1, held_back=(), rewind=False)

    async def commit() -> None:
        committer = KafkaOffsetCommitter(
            {"bootstrap_servers": bootstrap}, timeout=10, replica_id=writer
        )
        try:
            await committer.commit(request)
        finally:
            await committer.close()

    run_sync(commit())


def test_a_late_commit_of_the_old_owner_is_caught_and_repaired_after_the_takeover(
    pair: ReplicaCluster, kafka_bootstrap: str, new_topic: Any
) -> None:
    topic = new_topic(1)
    groups = [unique_group("takeover") for _ in range(6)]
    first = next(iter(pair.replicas.values()))
    for group in groups:
        for batch in (1, 2, 3):
            progress = spark_progress(batch, {topic: {"0": 10 * batch}}, query=f"q-{group}")
            assert first.post_progress(group, progress).status_code == 200
    for group in groups:
        wait_for(
            lambda g=group: committed_offsets(kafka_bootstrap, g) == {(topic, 0): 30},
            timeout=30,
            what=f"{group} committed at 30",
        )
    owners = {g: wait_for(lambda g=g: pair.owner_of(g), what=f"{g}'s owner") for g in groups}
    old = owners[groups[0]]
    taken = [g for g in groups if owners[g] == old]
    new_name = next(name for name in pair.replicas if name != old)
    old_owner, new_owner = pair.replicas[old], pair.replicas[new_name]
    assert old_owner.process is not None
    assert metric(new_owner.metrics(), "sidecar_takeover_mismatches_total") == 0

    old_owner.process.send_signal(signal.SIGSTOP)  # no more renewals, no more commits
    late_commit(kafka_bootstrap, groups[0], topic, 10, writer=f"replica-{old}")
    assert committed_offsets(kafka_bootstrap, groups[0]) == {(topic, 0): 10}  # moved back

    for group in taken:  # the new owner takes them all (the lease ends in 6 s)...
        wait_for(lambda g=group: pair.owner_of(g) == new_name, timeout=30, what=f"{group} taken")
    wait_for(  # ... and puts back the one that moved
        lambda: committed_offsets(kafka_bootstrap, groups[0]) == {(topic, 0): 30},
        timeout=30,
        what="the stored offsets committed again",
    )
    wait_for(
        lambda: metric(new_owner.metrics(), "sidecar_takeover_mismatches_total") == 1,
        what="the mismatch counted",
    )
    for group in taken[1:]:  # untouched groups: read back, equal, left alone
        assert committed_offsets(kafka_bootstrap, group) == {(topic, 0): 30}
    warnings = [
        line
        for line in map(json.loads, new_owner.log.read_text().splitlines())
        if "after taking group" in line.get("message", "")
    ]
    assert len(warnings) == 1, warnings
    assert groups[0] in warnings[0]["message"]
    assert f"{topic}/0@10" in warnings[0]["message"]
