"""``/metrics``' per-group series (``observe.fleet_metrics``, the watcher's) keep each
group's series of the lag monitor's evaluation from one build to the next while the
evaluation has not replaced them, and its series of its memory while nothing new was told
of it: whatever changes, a build says byte for byte what a build from nothing says, and
only the groups an evaluation changed or told anew are rendered again."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from spark_offset_sidecar.core.lag.group_memory import GroupMemory, memory_of
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.observe.fleet_metrics import FleetExposition, FleetOptions
from spark_offset_sidecar.testing import InMemoryLogEnds, InMemoryRecordTimes
from tests.support.monitors import IDLE, idle_and_lagging, monitor_of

GROUPS = 12


@dataclass
class Told:
    """What the watcher was told of the teller's memory (``runtime.watcher_memory``)."""

    groups: dict[str, GroupMemory] = field(default_factory=dict)
    unattributed: dict[str, int] = field(default_factory=dict)

    def tell(self, fleet: Ledger, *group_ids: str) -> None:
        """The teller's memory of ``group_ids`` (every group: none given), as the relay
        tells it: a new snapshot each, a group gone forgotten."""
        for group_id in group_ids or list(fleet.groups.keys() | self.groups.keys()):
            group = fleet.groups.get(group_id)
            if group is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = memory_of(group, None, None)


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
    told = Told()
    kept = FleetExposition(lambda: fleet, lambda: monitor, told, options, clock=lambda: clock[0])

    def afresh() -> bytes:
        fresh = FleetExposition(
            lambda: fleet, lambda: monitor, told, options, clock=lambda: clock[0]
        )
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
                    told.tell(fleet, g)
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
            if rng.random() < 0.8:  # else told at a later message
                told.tell(fleet, g)
        elif roll < 0.7:  # a group comes with no commit yet: a status, no lag figures
            g = f"new-{rng.randint(0, 5)}"
            fleet.groups[g] = GroupState(g, f"q-{g}", failures=rng.randint(0, 4))
            asyncio.run(monitor.poll())
        elif roll < 0.8:  # told of events of no known group
            told.unattributed = {"unknown_query": rng.randint(0, 3)}
        # else: nothing changed since the last build
        assert asyncio.run(kept.rendered())[0] == afresh()
    told.tell(fleet)
    asyncio.run(kept.rendered())
    rendered, remembered = kept.renders, kept.memory_renders
    first = sorted(fleet.groups)[0]
    fleet.groups[first].counters.succeeded += 1  # no evaluation since
    told.tell(fleet, first)
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
    """The watcher keeps each group's series of its told memory between builds: a change
    of any value they show, once told, renders that group again, and that group only."""
    fleet = Ledger()
    for g in ("a", "b", "c"):
        fleet.groups[g] = GroupState(g, f"q-{g}")
    told = Told()
    told.tell(fleet)
    options = FleetOptions(max_age=0, cluster_names=str, granularity="partition")
    clock = [10_000.0]
    kept = FleetExposition(lambda: fleet, lambda: None, told, options, clock=lambda: clock[0])
    asyncio.run(kept.rendered())
    for what, change in MEMORY_CHANGES:
        before = kept.memory_renders
        change(fleet.groups["b"])
        told.tell(fleet, "b")
        clock[0] += 1  # the time a checkpoint waits moves: written anew, not kept
        fresh = FleetExposition(lambda: fleet, lambda: None, told, options, clock=lambda: clock[0])
        text = asyncio.run(kept.rendered())[0]
        assert text == asyncio.run(fresh.rendered())[0], what
        assert kept.memory_renders == before + 1, what
    assert b'sidecar_commit_behind_seconds{consumergroup="b",cluster_name="eu"} 114.0' in text
    assert b'sidecar_commit_behind_checkpoints{consumergroup="b",cluster_name="eu"} 1' in text


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
    exposition = FleetExposition(lambda: fleet, lambda: monitor, Told(), FleetOptions(max_age=0))
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
def test_the_watcher_exports_every_series_its_memory_from_what_it_was_told(
    granularity: str,
) -> None:
    """Every per-group series comes from the watcher: the evaluation's and the store's
    from its ledger, the memory's (counters, commits) from what it was told, none of them
    from a group's defaults: a group its ledger holds and nothing was told of has no
    counter (a watcher started again shows none at 0 before it is told), one told of
    and not held (another replica commits it) its counters but no commit series."""
    fleet, reader = idle_and_lagging()
    teller = fleet.groups["lagging"]
    teller.counters.succeeded = 3
    teller.counters.failed["timeout"] = 1
    clock = [10_000.0]
    monitor = monitor_of(fleet, reader, clock)
    asyncio.run(monitor.poll())
    told = Told()
    options = FleetOptions(granularity=granularity, max_age=0)

    def exported() -> list[str]:
        exposition = FleetExposition(lambda: fleet, lambda: monitor, told, options)
        return samples(asyncio.run(exposition.rendered())[0])

    untold = exported()
    assert any(s.startswith("sidecar_consumergroup_lag") for s in untold)
    assert any(s.startswith("sidecar_pending_checkpoints") for s in untold)
    assert not any(s.startswith(("sidecar_commits_", "sidecar_last_")) for s in untold)

    told.tell(fleet)
    told.unattributed = {"unknown_query": 2}
    other = GroupState("other", "q3", committed=CommittedOffsets("q3", 1, {IDLE: 1}, 1.0))
    other.counters.events["accepted"] = 4
    told.groups["other"] = memory_of(other, None, None)  # not held: another replica's
    fleet.commit_only({"idle", "lagging"})
    text = exported()
    assert 'sidecar_commits_succeeded_total{consumergroup="lagging"} 3' in text
    assert (
        'sidecar_commits_failed_by_reason_total{consumergroup="lagging",reason="timeout"} 1' in text
    )
    assert 'sidecar_last_successful_commit_timestamp_seconds{consumergroup="idle"} 1.0' in text
    assert 'sidecar_events_total{consumergroup="",outcome="unknown_query"} 2' in text
    assert 'sidecar_events_total{consumergroup="other",outcome="accepted"} 4' in text
    assert 'sidecar_commits_succeeded_total{consumergroup="other"} 0' in text
    commit_series = ("sidecar_commit_", "sidecar_last_", "sidecar_committed_")
    assert not any(s.startswith(commit_series) and '"other"' in s for s in text)
    if granularity == "partition":
        assert 'sidecar_committed_offset{consumergroup="idle",topic="idle",partition="0"} 5' in text
    assert set(untold) < set(text)


def test_a_build_is_kept_until_max_age_or_a_memory_update_makes_it_stale() -> None:
    """What was told reaches the next scrape (``stale``), even when it was told while a
    build was under way: that build is answered, not kept."""
    fleet, told = Ledger(), Told()
    telling_during_a_build = [False]

    def ledger() -> Ledger:
        if telling_during_a_build[0]:
            telling_during_a_build[0] = False
            exposition.stale()
        return fleet

    exposition = FleetExposition(ledger, lambda: None, told, FleetOptions(max_age=60))
    asyncio.run(exposition.rendered())
    asyncio.run(exposition.rendered())
    assert exposition.builds == 1, "kept max_age"
    exposition.stale()
    asyncio.run(exposition.rendered())
    assert exposition.builds == 2, "built anew once stale"
    telling_during_a_build[0] = True
    exposition.stale()
    asyncio.run(exposition.rendered())
    asyncio.run(exposition.rendered())
    assert exposition.builds == 4, "a build made stale while under way is not kept"
    asyncio.run(exposition.rendered())
    assert exposition.builds == 4
