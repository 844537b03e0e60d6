"""The commit loop with a recording committer: concurrency across groups, one in flight
per group, retries without new events, clean stop."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry

from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.ledger.changes import CommitRequest
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import OffsetMap, TopicPartition, describe
from spark_offset_sidecar.errors import BrokerUnavailable
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.runtime import commit_loop
from spark_offset_sidecar.runtime.commit_loop import CommitLoop
from spark_offset_sidecar.runtime.durable_ledger import DurableLedger
from spark_offset_sidecar.testing import InMemoryStore
from tests.support.durable import durable_ledger
from tests.support.service import until

T0 = TopicPartition("t", 0)


class RecordingCommitter:
    """Records per-group overlap, fails the first ``failures`` commits; ``held``, each
    commit stays in flight until the test sets ``released``."""

    def __init__(self, failures: int = 0, *, held: bool = False) -> None:
        self.failures = failures
        self.released = asyncio.Event()
        if not held:
            self.released.set()
        self.active: Counter[str] = Counter()
        self.max_active_per_group = 0
        self.max_active = 0
        self.begun: list[CommitRequest] = []
        self.done: list[CommitRequest] = []
        self.started = asyncio.Event()  # a commit has begun

    async def commit(self, request: CommitRequest) -> None:
        self.active[request.group_id] += 1
        self.max_active_per_group = max(self.max_active_per_group, self.active[request.group_id])
        self.max_active = max(self.max_active, sum(self.active.values()))
        self.begun.append(request)
        self.started.set()
        try:
            await self.released.wait()
            if self.failures > 0:
                self.failures -= 1
                raise BrokerUnavailable("down")
            self.done.append(request)
        finally:
            self.active[request.group_id] -= 1

    def waiting(self, group_id: str) -> str | None:
        return None

    async def close(self) -> None:
        pass


async def running(committer: RecordingCommitter, **ledger_args: object):  # type: ignore[no-untyped-def]
    durable = durable_ledger(Ledger(**ledger_args), InMemoryStore())  # type: ignore[arg-type]
    loop = CommitLoop(durable, committer, SidecarMetrics(CollectorRegistry()), tick=0.05)
    task = asyncio.create_task(loop.run())
    return durable, loop, task


async def progress(durable: DurableLedger, loop: CommitLoop, group: str, batch: int) -> None:
    await durable.record(
        lambda ledger: ledger.decide_progress(f"q-{group}", group, "r", batch, {T0: batch}, 0.0)
    )
    loop.wake()


async def drained(durable: DurableLedger) -> None:
    groups = durable.ledger.groups.values()
    await until(
        lambda: all(g.slot is None and g.in_flight is None for g in groups),
        what="every slot committed",
    )


async def test_groups_commit_concurrently_but_each_one_at_a_time() -> None:
    committer = RecordingCommitter(held=True)
    durable, loop, task = await running(committer)
    groups = [f"g{group}" for group in range(20)]
    for group in groups:
        await progress(durable, loop, group, 0)
    # Every group's commit in flight at once: groups do not wait for each other.
    await until(lambda: sum(committer.active.values()) == 20, what="20 commits at once")
    for batch in range(1, 5):
        for group in groups:
            await progress(durable, loop, group, batch)
    # A group taken after those events shows the loop has passed over them since: it
    # took none of the 20 again while its commit was in flight.
    await progress(durable, loop, "later", 0)
    await until(lambda: committer.active["later"] == 1, what="the later group's commit")
    assert committer.max_active_per_group == 1
    assert len(committer.begun) == 21, "one commit a group while the first is in flight"
    committer.released.set()
    await drained(durable)
    assert committer.max_active_per_group == 1
    assert committer.max_active == 21
    for group in groups:
        state = durable.ledger.groups[group]
        assert state.committed is not None
        assert state.committed.offsets == {T0: 4}
    await loop.stop(grace=1)
    task.cancel()


async def test_failed_commit_is_retried_without_a_new_event() -> None:
    committer = RecordingCommitter(failures=3)
    durable, loop, task = await running(committer, backoff=Backoff(initial=0.01, cap=0.05))
    await progress(durable, loop, "g", 1)
    await drained(durable)
    group = durable.ledger.groups["g"]
    assert group.counters.failed["broker_unavailable"] == 3
    assert group.counters.succeeded == 1
    assert [r.attempt for r in committer.done] == [4]
    await loop.stop(grace=1)
    task.cancel()


async def test_stop_cancels_commits_past_the_grace_and_keeps_their_offsets() -> None:
    committer = RecordingCommitter(held=True)  # never released: a commit that never ends
    durable, loop, task = await running(committer)
    await progress(durable, loop, "g", 1)
    await asyncio.wait_for(committer.started.wait(), 60)
    assert durable.ledger.groups["g"].in_flight is not None
    await asyncio.wait_for(loop.stop(grace=0.05), 60)  # the commit outlives any grace
    await asyncio.wait_for(task, 60)
    assert committer.done == []
    persisted = durable.store.persisted  # type: ignore[attr-defined]
    assert not any(type(c).__name__ == "CommitSucceeded" for c in persisted)


async def test_a_commit_is_logged_at_info_and_its_text_is_built_only_when_shown(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    described: list[object] = []

    def counting_describe(offsets: OffsetMap) -> str:
        described.append(offsets)
        return describe(offsets)

    monkeypatch.setattr(commit_loop, "describe", counting_describe)
    committer = RecordingCommitter()
    durable, loop, task = await running(committer)
    with caplog.at_level(logging.WARNING, logger=commit_loop.__name__):
        await progress(durable, loop, "quiet", 1)
        await drained(durable)
    assert described == [], "a commit's description was built while INFO was off"
    with caplog.at_level(logging.INFO, logger=commit_loop.__name__):
        await progress(durable, loop, "loud", 1)
        await drained(durable)
    assert "group loud committed checkpoint 1: t/0@1" in caplog.messages
    await loop.stop(grace=1)
    task.cancel()
