"""The lease keeper's read-back after a takeover (ledger R12), with the in-memory double
of Kafka's committed offsets; on real replicas and the real broker it is
``tests/e2e/test_takeover.py``."""

from __future__ import annotations

import time
from typing import Any, cast

from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.ledger.leases import Ownership
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.runtime.lease_keeper import LeaseKeeper
from spark_offset_sidecar.testing import InMemoryCommitter, InMemoryStore
from tests.support.durable import durable_ledger

T0 = TopicPartition("t", 0)


async def test_only_a_group_that_kafka_holds_differently_is_counted_and_committed_again() -> None:
    ledger = Ledger()
    kafka = InMemoryCommitter()
    for group in ("moved", "same", "pending"):
        ledger.apply(ledger.decide_progress(f"q-{group}", group, "r", 3, {T0: 30}, now=1.0))
        request = ledger.take(group, 1.0)
        assert request is not None
        await kafka.commit(request)
        ledger.apply_change(ledger.commit_result(request, now=2.0))
    # Late commits of the old owner land: older offsets for "moved" and "pending"; but
    # "pending" has a newer checkpoint waiting, whose commit puts Kafka right anyway.
    for group in ("moved", "pending"):
        late = Checkpoint(f"q-{group}", group, 1, "r", {T0: 10}, 0.0)
        await kafka.commit(CommitRequest(late, {T0: 10}, attempt=1, held_back=(), rewind=False))
    ledger.apply(ledger.decide_progress("q-pending", "pending", "r", 4, {T0: 40}, now=3.0))
    ownership = Ownership("r1", 6.0, 1.0)
    ownership.renewed_at(time.monotonic(), {"moved": 1, "same": 1, "pending": 1})
    mismatches: list[str] = []
    woken: list[bool] = []
    keeper = LeaseKeeper(
        cast(Any, None),  # the lease store and the notices take no part in a read-back
        cast(Any, None),
        ownership,
        durable_ledger(ledger, InMemoryStore()),
        on_owned=lambda: woken.append(True),
        read_back=kafka,
        read_back_after=0.0,
        on_mismatch=mismatches.append,
    )
    await keeper.read_back_taken({"moved", "same", "pending"})
    assert mismatches == ["moved"]
    assert woken == [True]
    assert ledger.ready_groups(now=4.0) == ["pending", "moved"]
    again = ledger.take("moved", 4.0)
    assert again is not None
    assert again.refresh
    assert again.offsets == {T0: 30}
