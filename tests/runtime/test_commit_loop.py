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

T0 = TopicPartition("t", 0)


class RecordingCommitter:
    """Commits slowly, records per-group overlap, fails the first ``failures`` commits."""

    def __init__(self, delay: float = 0.02, failures: int = 0) -> None:
        self.delay = delay
        self.failures = failures
        self.active: Counter[str] = Counter()
        self.max_active_per_group = 0
        self.max_active = 0
        self.done: list[CommitRequest] = []
        self.started = asyncio.Event()  # a commit has begun

    async def commit(self, request: CommitRequest) -> None:
        self.active[request.group_id] += 1
        self.max_active_per_group = max(self.max_active_per_group, self.active[request.group_id])
        self.max_active = max(self.max_active, sum(self.active.values()))
        self.started.set()
        try:
            await asyncio.sleep(self.delay)
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
    durable = DurableLedger(Ledger(**ledger_args), InMemoryStore())  # type: ignore[arg-type]
    loop = CommitLoop(durable, committer, SidecarMetrics(CollectorRegistry()), tick=0.05)
    task = asyncio.create_task(loop.run())
    return durable, loop, task


async def progress(durable: DurableLedger, loop: CommitLoop, group: str, batch: int) -> None:
    await durable.record(
        lambda ledger: ledger.decide_progress(f"q-{group}", group, "r", batch, {T0: batch}, 0.0)
    )
    loop.wake()


async def drained(durable: DurableLedger) -> None:
    for _ in range(400):
        groups = durable.ledger.groups.values()
        if all(g.slot is None and g.in_flight is None for g in groups):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not drained")


async def test_groups_commit_concurrently_but_each_one_at_a_time() -> None:
    committer = RecordingCommitter(delay=0.05)
    durable, loop, task = await running(committer)
    for batch in range(5):
        for group in range(20):
            await progress(durable, loop, f"g{group}", batch)
        await asyncio.sleep(0.01)
    await drained(durable)
    assert committer.max_active_per_group == 1
    assert committer.max_active > 1, "groups do not wait for each other"
    for group in range(20):
        state = durable.ledger.groups[f"g{group}"]
        assert state.committed is not None
        assert state.committed.offsets == {T0: 4}
    await loop.stop(grace=1)
    task.cancel()


async def test_failed_commit_is_retried_without_a_new_event() -> None:
    committer = RecordingCommitter(delay=0.0, failures=3)
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
    committer = RecordingCommitter(delay=3600.0)
    durable, loop, task = await running(committer)
    await progress(durable, loop, "g", 1)
    await asyncio.wait_for(committer.started.wait(), 10)
    assert durable.ledger.groups["g"].in_flight is not None
    await asyncio.wait_for(loop.stop(grace=0.05), 10)  # not the commit's hour
    await asyncio.wait_for(task, 10)
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
    committer = RecordingCommitter(delay=0.0)
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
