"""``/metrics``' per-group series (``observe.fleet_metrics``) keep each group's series of
the lag monitor's evaluation from one build to the next while the evaluation has not
replaced them: whatever changes, a build says byte for byte what a build from nothing
says, and only the groups an evaluation changed are rendered again."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.observe.fleet_metrics import (
    ALL_SERIES,
    EVALUATED,
    MEMORY,
    STORED,
    FleetExposition,
    FleetOptions,
)
from spark_offset_sidecar.testing import InMemoryLogEnds, InMemoryRecordTimes
from tests.support.monitors import idle_and_lagging, monitor_of

GROUPS = 12


@pytest.mark.parametrize(
    ("seed", "granularity", "kafka_lag"),
    [(0, "topic", False), (1, "partition", True), (2, "group", False), (3, "topic", True)],
)
def test_a_build_that_keeps_renderings_says_what_a_build_from_nothing_says(
    seed: int, granularity: str, kafka_lag: bool
) -> None:
    rng = random.Random(seed)
    tps = {f"g{g:02}": [TopicPartition(f"t{g % 4}", p) for p in range(3)] for g in range(GROUPS)}
    ends = {tp: 100 for group in tps.values() for tp in group}
    starts = dict.fromkeys(ends, 0)
    fleet = Ledger()
    reader = InMemoryLogEnds(ends, starts=starts)
    times = InMemoryRecordTimes()
    clock = [10_000.0]
    monitor = monitor_of(fleet, reader, clock, record_times=times)
    options = FleetOptions(
        granularity=granularity,
        export_kafka_lag=kafka_lag,
        max_age=0,
        cluster_names=lambda cluster: cluster or "main",
    )
    kept = FleetExposition(lambda: fleet, lambda: monitor, options, clock=lambda: clock[0])

    def afresh() -> bytes:
        fresh = FleetExposition(lambda: fleet, lambda: monitor, options, clock=lambda: clock[0])
        return asyncio.run(fresh.rendered())[0]

    for _ in range(30):
        roll = rng.random()
        if roll < 0.4:  # records arrive, some are deleted, jobs commit, the monitor reads
            clock[0] += rng.choice([1.0, 10.0])
            for tp in ends:
                ends[tp] += rng.randint(0, 20)
                if rng.random() < 0.1:
                    starts[tp] = rng.randint(starts[tp], ends[tp])
            for g, group_tps in tps.items():
                if rng.random() < 0.5:
                    at = {tp: rng.randint(starts[tp], ends[tp]) for tp in group_tps}
                    committed = CommittedOffsets(f"q-{g}", 1, at, clock[0])
                    group = fleet.groups.get(g) or GroupState(g, f"q-{g}")
                    fleet.groups[g] = replace(group, committed=committed)
            asyncio.run(monitor.poll())
        elif roll < 0.55 and fleet.groups:  # a group goes, counts, or its labels change
            g = rng.choice(sorted(fleet.groups))
            what = rng.random()
            if what < 0.15:
                del fleet.groups[g]
            elif what < 0.3:  # its labels change both ways (as the group's cluster would)
                fleet.groups[g] = replace(fleet.groups[g], cluster=rng.choice([None, "eu"]))
            else:  # a value its memory series show
                rng.choice(MEMORY_CHANGES)[1](fleet.groups[g])
        elif roll < 0.7:  # a group comes with no commit yet: a status, no lag figures
            g = f"new-{rng.randint(0, 5)}"
            fleet.groups[g] = GroupState(g, f"q-{g}", failures=rng.randint(0, 4))
            asyncio.run(monitor.poll())
        # else: nothing changed since the last build
        assert asyncio.run(kept.rendered())[0] == afresh()
    rendered, remembered = kept.renders, kept.memory_renders
    fleet.groups[sorted(fleet.groups)[0]].counters.succeeded += 1  # no evaluation since
    assert asyncio.run(kept.rendered())[0] == afresh()
    assert kept.renders == rendered, "an unchanged evaluation is not rendered again"
    assert kept.memory_renders == remembered + 1, "only the group that counted"
    assert asyncio.run(kept.rendered())[0] == afresh()
    assert kept.memory_renders == remembered + 1, "nothing counted: nothing rendered"


def _count(field: str) -> Callable[[GroupState], None]:
    def change(group: GroupState) -> None:
        setattr(group.counters, field, getattr(group.counters, field) + 1)

    return change


# Each value that a group's series of this process's memory show, changed in turn.
MEMORY_CHANGES: list[tuple[str, Callable[[GroupState], object]]] = [
    ("succeeded", _count("succeeded")),
    ("skipped", _count("skipped")),
    ("pending_dropped", _count("pending_dropped")),
    ("held_back", _count("held_back")),
    ("refreshed", _count("refreshed")),
    ("a failure's reason", lambda g: g.counters.failed.update(["timeout"])),
    ("another reason", lambda g: g.counters.failed.update(["rebalance"])),
    ("an event's outcome", lambda g: g.counters.events.update(["accepted"])),
    ("a commit taken", lambda g: setattr(g, "in_flight", _request(g.group_id))),
    ("its answer come", lambda g: setattr(g, "in_flight", None)),
    ("its cluster (a label)", lambda g: setattr(g, "cluster", "eu")),
    ("a commit's answer", lambda g: setattr(g, "committed", _committed(g, 1, 9_000.0))),
    ("a newer checkpoint waiting", lambda g: setattr(g, "slot", _checkpoint(g, 3))),
    ("the next commit", lambda g: setattr(g, "committed", _committed(g, 2, 9_500.0))),
]


def _checkpoint(group: GroupState, checkpoint_id: int) -> Checkpoint:
    tp = TopicPartition("t0", 0)
    return Checkpoint(f"q-{group.group_id}", group.group_id, checkpoint_id, None, {tp: 1}, 9_900.0)


def _committed(group: GroupState, checkpoint_id: int, at: float) -> CommittedOffsets:
    return CommittedOffsets(f"q-{group.group_id}", checkpoint_id, {TopicPartition("t0", 0): 5}, at)


def test_a_groups_memory_series_are_rendered_again_when_a_value_they_show_changes() -> None:
    """The process taking events keeps each group's series of its memory between builds:
    a change of any value they show renders that group again, and that group only."""
    fleet = Ledger()
    for g in ("a", "b", "c"):
        fleet.groups[g] = GroupState(g, f"q-{g}")
    options = FleetOptions(
        series=frozenset({MEMORY}), max_age=0, cluster_names=str, granularity="partition"
    )
    clock = [10_000.0]
    kept = FleetExposition(lambda: fleet, lambda: None, options, clock=lambda: clock[0])
    asyncio.run(kept.rendered())
    for what, change in MEMORY_CHANGES:
        before = kept.memory_renders
        change(fleet.groups["b"])
        clock[0] += 1  # the time a checkpoint waits moves: written anew, not kept
        fresh = FleetExposition(lambda: fleet, lambda: None, options, clock=lambda: clock[0])
        assert asyncio.run(kept.rendered())[0] == asyncio.run(fresh.rendered())[0], what
        assert kept.memory_renders == before + 1, what


def _request(group_id: str) -> CommitRequest:
    tp = TopicPartition("t0", 0)
    checkpoint = Checkpoint(f"q-{group_id}", group_id, 1, None, {tp: 1}, 0.0)
    return CommitRequest(checkpoint, {tp: 1}, attempt=1)


def test_a_group_the_evaluation_kept_is_not_rendered_again() -> None:
    """An idle caught-up group keeps its status and figures through reads (its
    ``evaluated_in`` stays): only the lagging group, evaluated again at each read, is
    rendered again."""
    fleet, reader = idle_and_lagging()
    clock = [10_000.0]
    monitor = monitor_of(fleet, reader, clock)
    exposition = FleetExposition(lambda: fleet, lambda: monitor, FleetOptions(max_age=0))
    asyncio.run(monitor.poll())
    asyncio.run(exposition.rendered())
    assert exposition.renders == 2
    for read in range(1, 4):
        clock[0] += 10
        asyncio.run(monitor.poll())
        asyncio.run(exposition.rendered())
        assert exposition.renders == 2 + read  # the lagging group's, each read
    assert monitor.evaluated_in["idle"] == 1 < monitor.evaluated_in["lagging"] == monitor.rounds


def samples(text: bytes) -> list[str]:
    return [line for line in text.decode().splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize("granularity", ["topic", "partition"])
def test_the_taker_and_the_watcher_export_every_series_of_one_process_once(
    granularity: str,
) -> None:
    """With the watcher in a process of its own, the process taking events exports its
    memory's series and the watcher the stored and evaluated ones: together every sample
    one process exports, none twice."""
    fleet, reader = idle_and_lagging()
    fleet.groups["lagging"].counters.succeeded = 3
    fleet.groups["lagging"].counters.failed["timeout"] = 1
    clock = [10_000.0]
    monitor = monitor_of(fleet, reader, clock)
    asyncio.run(monitor.poll())

    def exported(series: frozenset[str]) -> list[str]:
        options = FleetOptions(granularity=granularity, max_age=0, series=series)
        return samples(
            asyncio.run(FleetExposition(lambda: fleet, lambda: monitor, options).rendered())[0]
        )

    one = exported(ALL_SERIES)
    taker, watcher = exported(frozenset({MEMORY})), exported(frozenset({STORED, EVALUATED}))
    assert sorted(taker + watcher) == sorted(one)
    assert not set(taker) & set(watcher)
    assert any(s.startswith("sidecar_commits_succeeded_total") for s in taker)
    assert any(s.startswith("sidecar_consumergroup_lag") for s in watcher)
    assert any(s.startswith("sidecar_pending_checkpoints") for s in watcher)
    # The commits' series are the committing process's, as Kafka answered it: the store
    # the watcher reads has them a write and a read later.
    commits = ["sidecar_last_successful_commit_timestamp_seconds"]
    if granularity == "partition":
        commits.append("sidecar_committed_offset")
    for name in commits:
        assert any(s.startswith(name + "{") for s in taker), name
        assert not any(s.startswith(name + "{") for s in watcher), name
