"""The lag monitor, on a real ``Ledger`` whose groups the test sets, evaluates only
groups whose status can have changed (their commit, query, failures or log ends changed,
or a partition lags: the time matters then), and the statuses it keeps are exactly those
of evaluating every group every time."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from typing import Any, Literal

import pytest

from spark_offset_sidecar.core.lag.status import CommitWindows, GroupStatus
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.testing import InMemoryLogEnds
from tests.support.monitors import idle_and_lagging, monitor_of

GROUPS = 12
PARTITIONS = 3


def every_group_evaluated(
    windows: CommitWindows, fleet: Ledger, ends: dict[TopicPartition, int], now: float
) -> dict[str, GroupStatus]:
    for group in fleet.groups.values():
        windows.sample(group, ends, now)
    windows.keep_only(fleet.groups)
    return {g.group_id: windows.evaluate(g, ends, now, err_after=3) for g in fleet.groups.values()}


@pytest.mark.parametrize("seed", range(8))
def test_the_kept_statuses_are_those_of_evaluating_every_group(seed: int) -> None:
    rng = random.Random(seed)
    tps = {f"g{g}": [TopicPartition(f"t{g}", p) for p in range(PARTITIONS)] for g in range(GROUPS)}
    offsets = {tp: 0 for group in tps.values() for tp in group}
    ends = dict(offsets)
    fleet = Ledger(groups=[GroupState(g, query_id=f"q-{g}") for g in tps])
    reader = InMemoryLogEnds(ends)
    clock = [1_000.0]
    monitor = monitor_of(fleet, reader, clock)
    reference = CommitWindows(4, stop_after=60)
    evaluated = 0
    for _ in range(60):
        clock[0] += rng.choice([1.0, 5.0, 30.0])
        for group_id, group_tps in tps.items():
            roll = rng.random()
            if roll < 0.15:  # records arrive
                for tp in group_tps:
                    ends[tp] += rng.randint(0, 20)
            elif roll < 0.3:  # the job commits, maybe all it read
                for tp in group_tps:
                    offsets[tp] = rng.randint(offsets[tp], ends[tp])
                committed = CommittedOffsets(
                    f"q-{group_id}", 1, {tp: offsets[tp] for tp in group_tps}, clock[0]
                )
                fleet.groups[group_id] = replace(fleet.groups[group_id], committed=committed)
            elif roll < 0.35:  # a commit fails, or a success clears failures
                group = fleet.groups[group_id]
                fleet.groups[group_id] = replace(
                    group, failures=rng.choice([0, group.failures + 1])
                )
        reader.ends = dict(ends)
        asyncio.run(monitor.poll())
        expected = every_group_evaluated(reference, fleet, reader.ends, clock[0])
        assert monitor.statuses == expected
        evaluated += 1
    assert monitor.evaluations < GROUPS * evaluated  # some statuses were kept, not redone


def test_a_caught_up_idle_group_is_not_evaluated_again_and_a_lagging_one_is() -> None:
    fleet, reader = idle_and_lagging()
    clock = [10.0]
    monitor = monitor_of(fleet, reader, clock)
    asyncio.run(monitor.poll())
    assert monitor.evaluations == 2
    for _ in range(3):
        clock[0] += 30
        asyncio.run(monitor.poll())
    assert monitor.evaluations == 2 + 3  # the lagging group each time, the idle one never
    assert monitor.statuses["lagging"].status.value == "STOP"  # the time made it so


def test_the_tables_a_reader_holds_stay_whole_through_the_next_evaluation() -> None:
    """A reader (a page, a scrape) takes the statuses and lags and hands the loop back
    between groups: an evaluation that completes meanwhile replaces them and frees the old
    objects a few at a time, without emptying the tables the reader holds."""
    tps = {f"g{g:03}": TopicPartition("t", g) for g in range(200)}
    fleet = Ledger(
        groups=[
            GroupState(g, f"q-{g}", committed=CommittedOffsets(f"q-{g}", 1, {tp: 5}, 1.0))
            for g, tp in tps.items()
        ]
    )
    reader = InMemoryLogEnds({tp: 9 for tp in tps.values()})
    clock = [1_000.0]
    monitor = monitor_of(fleet, reader, clock)
    asyncio.run(monitor.poll())
    held_statuses, held_lags = monitor.statuses, monitor.lags
    as_read = (dict(held_statuses), dict(held_lags))
    assert len(as_read[0]) == len(as_read[1]) == len(tps)
    clock[0] += 30
    reader.ends = {tp: 20 for tp in tps.values()}  # every group is evaluated again
    asyncio.run(monitor.poll())
    assert monitor.statuses is not held_statuses
    assert monitor.lags is not held_lags
    assert (held_statuses, held_lags) == as_read


def test_a_woken_monitor_reads_now_not_at_its_next_interval() -> None:
    """``wake`` (a replica's watcher told the groups its replica took): the next read
    starts at once, though the interval (an hour here) has not passed; before the wake,
    the monitor waits, having read once."""
    fleet, reader = idle_and_lagging()
    steps: list[str] = []  # what the monitor did, in order
    parked: asyncio.Queue[None] = asyncio.Queue()
    ends = reader.log_ends

    async def counted(wanted: Any) -> Any:
        answer = await ends(wanted)
        steps.append("read")
        return answer

    class Waits(asyncio.Event):
        async def wait(self) -> Literal[True]:
            steps.append("waits")
            parked.put_nowait(None)
            return await super().wait()

    reader.log_ends = counted  # type: ignore[method-assign]
    monitor = monitor_of(fleet, reader, [10_000.0])
    monitor.interval = 3600

    async def scenario() -> None:
        monitor._woken = Waits()
        task = asyncio.create_task(monitor.run())
        try:
            await asyncio.wait_for(parked.get(), 60)  # the first read, then an hour's wait
            steps.append("wake")
            monitor.wake()
            await asyncio.wait_for(parked.get(), 60)  # the hour is not what ends this wait
            assert steps == ["read", "waits", "wake", "read", "waits"]
        finally:
            task.cancel()

    asyncio.run(scenario())
