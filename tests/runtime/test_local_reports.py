"""A single process's reports (``runtime.group_reports.LocalReports``): the summaries a
list ranks and counts are built once per evaluation of the lag monitor and shared until
the next, and they say at every moment what building them afresh would."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from spark_offset_sidecar.core.lag.figures import DataStatus, JobRates
from spark_offset_sidecar.core.lag.report import GroupReport, GroupSummary, summary
from spark_offset_sidecar.core.lag.status import Status
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState, QueryState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.runtime.group_reports import JobsSeen, LocalReports
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.testing import InMemoryLogEnds
from tests.support.monitors import monitor_of

GROUPS = 10


def afresh(monitor: LagMonitor, fleet: Ledger) -> list[GroupSummary]:
    """The summaries as built from nothing at this moment."""
    return [
        summary(status, monitor.lags.get(g), monitor.evaluated_at or 0.0, monitor.read_at)
        for g, status in sorted(monitor.statuses.items())
        if g in fleet.groups
    ]


@pytest.mark.parametrize("seed", range(6))
def test_the_summaries_are_those_built_afresh_and_shared_between_evaluations(
    seed: int,
) -> None:
    rng = random.Random(seed)
    tps = {f"g{g:02}": TopicPartition(f"t{g % 3}", g) for g in range(GROUPS)}
    ends = {tp: 100 for tp in tps.values()}
    fleet = Ledger(
        groups=[
            GroupState(g, f"q-{g}", committed=CommittedOffsets(f"q-{g}", 1, {tp: 50}, 1.0))
            for g, tp in tps.items()
        ]
    )
    reader = InMemoryLogEnds(dict(ends))
    clock = [1_000.0]
    monitor = monitor_of(fleet, reader, clock)
    reports = LocalReports(lambda: fleet, monitor, lambda _g: None, dict, lambda: clock[0])
    rebuilt = 0
    for _ in range(40):
        roll = rng.random()
        if roll < 0.5:  # records arrive, the jobs commit some, and the monitor reads
            clock[0] += rng.choice([1.0, 30.0])
            for g, tp in tps.items():
                ends[tp] += rng.randint(0, 30)
                if g in fleet.groups and rng.random() < 0.5:
                    committed = CommittedOffsets(f"q-{g}", 2, {tp: ends[tp]}, clock[0])
                    fleet.groups[g] = replace(fleet.groups[g], committed=committed)
            reader.ends = dict(ends)
            asyncio.run(monitor.poll())
        elif roll < 0.6 and fleet.groups:  # a group is deleted between two evaluations
            del fleet.groups[rng.choice(sorted(fleet.groups))]
        first = asyncio.run(reports.summaries())
        second = asyncio.run(reports.summaries())
        assert first == second == afresh(monitor, fleet)
        rebuilt += roll < 0.5
        # Nothing evaluated in between: the very same objects, not copies.
        assert all(a is b for a, b in zip(first, second, strict=True))
    assert rebuilt > 5


def test_a_group_gone_from_the_ledger_leaves_the_summaries_before_the_next_evaluation() -> None:
    tp = TopicPartition("t", 0)
    fleet = Ledger(
        groups=[
            GroupState(g, f"q-{g}", committed=CommittedOffsets(f"q-{g}", 1, {tp: 5}, 1.0))
            for g in ("a", "b")
        ]
    )
    monitor = LagMonitor(lambda: fleet, InMemoryLogEnds({tp: 9}), interval=10, err_after_failures=3)
    reports = LocalReports(lambda: fleet, monitor, lambda _g: None, dict, lambda: 0.0)
    asyncio.run(monitor.poll())
    assert [s.group_id for s in asyncio.run(reports.summaries())] == ["a", "b"]
    del fleet.groups["a"]
    assert [s.group_id for s in asyncio.run(reports.summaries())] == ["b"]
    assert monitor.rounds == 1


def test_every_reports_the_groups_asked_for_in_order_and_leaves_out_the_unknown() -> None:
    tp = TopicPartition("t", 0)
    names = [f"g{i}" for i in range(6)]
    fleet = Ledger(
        groups=[
            GroupState(g, f"q-{g}", committed=CommittedOffsets(f"q-{g}", 1, {tp: 5}, 1.0))
            for g in names
        ]
    )
    monitor = LagMonitor(lambda: fleet, InMemoryLogEnds({tp: 9}), interval=10, err_after_failures=3)
    reports = LocalReports(lambda: fleet, monitor, lambda _g: None, dict, lambda: 0.0)
    asyncio.run(monitor.poll())
    asked = asyncio.run(reports.every(["g4", "nobody", "g1", "g4"]))
    assert [r.status.group_id for r in asked] == ["g1", "g4"]
    assert [r.status.group_id for r in asyncio.run(reports.every())] == names
    assert asyncio.run(reports.every([])) == []


def test_a_summary_ranks_the_worst_first_then_by_name() -> None:
    def made(
        name: str, status: Status, data: DataStatus | None, seconds: float | None, lag: int
    ) -> GroupSummary:
        return GroupSummary(name, status, data, seconds, lag, 0.0, None)

    ranked = sorted(
        [
            made("ok-b", Status.OK, DataStatus.OK, 1.0, 5),
            made("ok-a", Status.OK, DataStatus.OK, 1.0, 5),
            made("ok-more-records", Status.OK, DataStatus.OK, 1.0, 50),
            made("ok-later", Status.OK, DataStatus.OK, 90.0, 1),
            made("ok-at-risk", Status.OK, DataStatus.AT_RISK, None, 0),
            made("ok-lost", Status.OK, DataStatus.LOST, None, 0),
            made("stalled", Status.STALL, None, None, 0),
            made("error", Status.ERR, DataStatus.OK, None, 0),
        ],
        key=lambda s: s.rank,
    )
    assert [s.group_id for s in ranked] == [
        "error",
        "stalled",
        "ok-lost",
        "ok-at-risk",
        "ok-later",
        "ok-more-records",
        "ok-a",
        "ok-b",
    ]


def test_the_process_taking_events_reports_as_a_lag_monitor_before_its_first_read() -> None:
    """Its watcher reads the log ends: ``JobsSeen`` answers ``one`` (``/v1/status/{group}``
    until the watcher knows the group) as an unread lag monitor did, the job's rates too."""
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    checkpoint = Checkpoint("q-flying", "flying", 2, None, {t0: 7}, 5.0)
    fleet = Ledger(
        queries=[QueryState("q-flying", "flying", 1.0, pending={3: checkpoint})],
        groups=[
            GroupState(
                "flying",
                "q-flying",
                in_flight=CommitRequest(checkpoint, {t0: 7}, 1),
                committed=CommittedOffsets("q-flying", 1, {t1: 4, t0: 5}, 1.0),
            ),
            GroupState("new", "q-new"),
            GroupState("failing", "q-f", failures=3, committed=CommittedOffsets("q-f", 1, {}, 2.0)),
        ],
    )
    waits = {"flying": "the broker is slow"}.get
    monitor = LagMonitor(lambda: fleet, InMemoryLogEnds({t0: 9}), interval=10, err_after_failures=3)
    monitor.waits = waits
    seen = JobsSeen(3, waits)
    for keeper in (monitor, seen):
        keeper.note_job("flying", JobRates(4.0, 10.0, 12.5, 800))
    before = LocalReports(lambda: fleet, monitor, waits, dict, lambda: 50.0)
    now = LocalReports(lambda: fleet, seen, waits, dict, lambda: 50.0)
    for group_id in ("flying", "new", "failing", "nobody"):
        assert asyncio.run(now.one(group_id)) == asyncio.run(before.one(group_id))
    flying = asyncio.run(now.one("flying"))
    assert isinstance(flying, GroupReport)
    assert flying.lag is not None
    assert flying.lag.catch_up.job == seen.job_of("flying") == monitor.jobs["flying"]
    assert (flying.pending, flying.log_ends_read_at) == (1, None)
    assert seen.job_of("new") is None
    assert asyncio.run(now.every()) == asyncio.run(now.summaries()) == []
    assert now.as_of([]) == (None, None)
