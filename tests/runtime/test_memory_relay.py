"""What the process taking events tells its child watcher (ledger R15,
``runtime.memory_relay``), and how the watcher takes it (``runtime.watcher_memory``): the
watcher's ledger reads each group as the teller's memory has it, through every way a
message can be lost. Pure, with the in-memory watcher; the real child is tested in
``tests/e2e/test_watcher.py``."""

from __future__ import annotations

import asyncio
import pickle
import time

import pytest
from prometheus_client import CollectorRegistry

from spark_offset_sidecar import __version__
from spark_offset_sidecar.adapters.watcher.memory_update import (
    MemoryUpdateRefused,
    decode_memory_update,
    encode_memory_update,
)
from spark_offset_sidecar.core.lag.figures import JobRates
from spark_offset_sidecar.core.lag.report import FolderReport
from spark_offset_sidecar.core.ledger.changes import CommitRequest
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import GroupState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.http.state import Runtime
from spark_offset_sidecar.observe.fleet_metrics import FleetExposition, FleetOptions
from spark_offset_sidecar.observe.metrics import SidecarMetrics
from spark_offset_sidecar.ports.watcher import MemoryUpdate
from spark_offset_sidecar.runtime.memory_relay import MemoryRelay
from spark_offset_sidecar.runtime.watcher_memory import WatcherMemory
from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.testing import InMemoryWatcher

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
JOB = JobRates(5.0, 100.0, 250.0, 800)
FOLDER = FolderReport("s3://b/cp", "q-a", 7, 6, 7, 1.5, (("throttled", 2),), "throttled", 9.0)


def progress(ledger: Ledger, group: str, batch: int, offset: int) -> None:
    ledger.apply(
        ledger.decide_progress(f"q-{group}", group, "r", batch, {T0: offset, T1: 1}, float(batch))
    )


def fail_once(ledger: Ledger, group: str, now: float = 100.0) -> CommitRequest:
    request = ledger.take(group, now)
    assert request is not None
    ledger.apply_change(ledger.commit_result(request, now=now, failure="group_has_members"))
    return request


def relay_of(
    ledger: Ledger,
    watcher: InMemoryWatcher,
    folders: dict[str, tuple[FolderReport, ...]],
    problems: list[str] | None = None,
) -> MemoryRelay:
    return MemoryRelay(
        ledger,
        watcher,
        waiting=lambda g: "coordinator unreachable" if g == "a" else None,
        job=lambda g: JOB if g == "a" else None,
        folders=lambda: folders,
        problems=lambda: problems or [],
    )


def test_the_ledger_collects_changed_memory_only_once_followed() -> None:
    ledger = Ledger()
    progress(ledger, "a", 1, 10)
    assert ledger.memory_changed is None  # not followed: nothing kept
    assert ledger.memory_changes() == set()
    assert ledger.memory_changed is None  # asking does not start following
    ledger.follow_memory()
    progress(ledger, "b", 1, 10)
    fail_once(ledger, "a")
    assert ledger.memory_changes() == {"a", "b"}
    assert ledger.memory_changes() == set()  # emptied
    progress(ledger, "b", 2, 11)  # an event counted on the group is a change of memory
    assert ledger.memory_changes() == {"b"}
    ledger.refresh((), ("b",), (), ())  # the store has no b any more (replicas, R11)
    assert "b" not in ledger.groups
    assert ledger.memory_changes() == {"b"}  # a watcher forgets it too


def test_the_first_message_is_whole_then_only_what_changed_and_what_is_in_flight() -> None:
    ledger = Ledger()
    for group in ("a", "b", "c"):
        progress(ledger, group, 1, 10)
    watcher, folders = InMemoryWatcher(), {"a": (FOLDER,)}
    relay = relay_of(ledger, watcher, folders)
    in_flight = ledger.take("a", 100.0)
    assert in_flight is not None

    assert asyncio.run(relay.tell())
    (whole,) = watcher.updates
    assert whole.whole
    assert set(whole.groups) == {"a", "b", "c"}
    assert whole.folders == folders
    sent_a = whole.groups["a"]
    assert sent_a is not None
    assert sent_a.in_flight == in_flight
    assert sent_a.job == JOB
    assert sent_a.waiting == "coordinator unreachable"

    progress(ledger, "b", 2, 11)
    assert asyncio.run(relay.tell())
    second = watcher.updates[-1]
    # b changed; a has a commit in flight (what it waits for may change any time)
    assert not second.whole
    assert set(second.groups) == {"a", "b"}
    assert second.folders is None  # unchanged

    ledger.apply_change(ledger.commit_result(in_flight, now=101.0, failure=None))
    registration = ledger.decide_progress("q-d", "d", "r", 1, {T0: 5}, 1.0)
    savepoint = ledger.savepoint(registration)
    ledger.apply(registration)
    assert asyncio.run(relay.tell())
    third = watcher.updates[-1]
    assert third.groups["d"] is not None  # told while its batch is being written
    done = third.groups["a"]
    assert done is not None
    assert done.in_flight is None
    assert done.waiting is None
    assert done.counters.succeeded == 1

    ledger.rollback(savepoint)  # its batch failed: the registration is undone
    assert asyncio.run(relay.tell())
    assert watcher.updates[-1].groups == {"d": None}  # the watcher forgets it too

    assert asyncio.run(relay.tell())  # nothing changed, nothing in flight: nothing sent
    assert len(watcher.updates) == 4


def test_a_message_not_taken_or_a_watcher_started_again_is_followed_by_a_whole_one() -> None:
    ledger = Ledger()
    for group in ("a", "b"):
        progress(ledger, group, 1, 10)
    watcher = InMemoryWatcher()
    relay = relay_of(ledger, watcher, {})
    assert asyncio.run(relay.tell())

    progress(ledger, "b", 2, 11)
    watcher.down = True
    assert not asyncio.run(relay.tell())  # b's change is lost with the message...
    watcher.down = False
    assert asyncio.run(relay.tell())
    assert watcher.updates[-1].whole  # ...and told again with everything

    watcher.started_again()
    assert asyncio.run(relay.tell())
    (first,) = watcher.updates
    assert first.whole
    assert set(first.groups) == {"a", "b"}


def test_the_watchers_ledger_reads_each_group_as_the_teller_has_it() -> None:
    teller = Ledger()
    progress(teller, "a", 1, 10)
    fail_once(teller, "a")
    request = fail_once(teller, "a", now=1000.0)  # after the backoff
    watcher = InMemoryWatcher()
    assert asyncio.run(relay_of(teller, watcher, {"a": (FOLDER,)}).tell())

    # The watcher's ledger as its store has it: a's slot and query, no memory.
    mine = Ledger(groups=[GroupState("a", query_id="q-a", slot=request.checkpoint)])
    jobs: dict[str, JobRates] = {}
    memory = WatcherMemory(mine, jobs.__setitem__)
    message = decode_memory_update(encode_memory_update(watcher.updates[-1]))  # over the wire
    memory.take(message)
    group, original = mine.groups["a"], teller.groups["a"]
    assert group.failures == original.failures == 2
    assert group.last_failure == "group_has_members"
    assert group.retry_at == original.retry_at
    assert group.counters == original.counters
    assert jobs == {"a": JOB}
    assert memory.folder_reports() == {"a": (FOLDER,)}

    # A group new to the watcher's ledger takes what was told when the store brings it.
    progress(teller, "b", 1, 5)
    relay = relay_of(teller, watcher, {})
    assert asyncio.run(relay.tell())
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))
    mine.groups["b"] = GroupState("b", query_id="q-b")
    assert mine.groups["b"].counters.events["accepted"] == 0
    memory.refreshed(["b"])
    assert mine.groups["b"].counters.events["accepted"] == 1


def test_the_watcher_knows_a_commit_when_told_and_an_older_store_row_does_not_undo_it() -> None:
    """The store has a commit once its batch is written and the watcher once it reads the
    store again (lag_read_interval_seconds): told the teller's last commit, the watcher's
    status says it within a message; a read of a row older than that keeps it (M2)."""
    teller = Ledger()
    progress(teller, "a", 1, 10)
    first = teller.take("a", 100.0)
    assert first is not None
    teller.apply_change(teller.commit_result(first, now=101.0))
    stored = teller.groups["a"].copy()  # the row as the watcher last read it
    progress(teller, "a", 2, 20)
    second = teller.take("a", 102.0)
    assert second is not None
    teller.apply_change(teller.commit_result(second, now=103.0))
    watcher = InMemoryWatcher()
    assert asyncio.run(relay_of(teller, watcher, {}).tell())

    mine = Ledger(groups=[stored.copy()])
    told = WatcherMemory(mine, lambda _g, _j: None)
    told.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))  # over the wire
    assert mine.groups["a"].committed == teller.groups["a"].committed
    committed = mine.groups["a"].committed
    assert committed is not None
    assert (committed.checkpoint_id, committed.at, committed.offsets[T0]) == (2, 103.0, 20)
    mine.refresh([], ["a"], [], [stored])  # the store follower reads the older row
    told.refreshed(["a"])
    assert mine.groups["a"].committed == committed


def test_a_group_not_held_yet_wakes_the_follower_and_a_whole_message_forgets_the_gone() -> None:
    teller = Ledger()
    progress(teller, "a", 1, 10)
    request = teller.take("a", 100.0)
    assert request is not None  # a's commit is in flight
    watcher = InMemoryWatcher()
    assert asyncio.run(relay_of(teller, watcher, {}).tell())
    mine = Ledger(groups=[GroupState("a", query_id="q-a")])
    wakes: list[None] = []
    memory = WatcherMemory(mine, lambda _g, _j: None, lambda: wakes.append(None))
    memory.take(watcher.updates[-1])
    assert (mine.groups["a"].in_flight, wakes) == (request, [])  # a is held: no wake

    progress(teller, "b", 1, 5)  # b: not in the watcher's store yet
    assert asyncio.run(relay_of(teller, watcher, {}).tell())
    memory.take(watcher.updates[-1])
    assert wakes == [None], "told of b, not held: the store is read now"

    # The teller lost a (its query released); a whole message holds every group it has.
    teller.groups.pop("a")
    memory.take(MemoryUpdate({"b": watcher.updates[-1].groups["b"]}, {}, True, ()))
    assert mine.groups["a"].in_flight is None, "a gone from the teller: nothing in flight"
    assert "a" not in memory.groups


def test_a_message_in_flight_round_trips_and_a_foreign_one_is_refused() -> None:
    ledger = Ledger()
    progress(ledger, "a", 1, 10)
    request = ledger.take("a", 100.0)
    assert request is not None
    watcher = InMemoryWatcher()
    assert asyncio.run(relay_of(ledger, watcher, {"a": (FOLDER,)}).tell())
    sent = watcher.updates[-1]
    assert decode_memory_update(encode_memory_update(sent)) == sent
    refused = {
        b"{": "not a memory update",
        b"": "not a memory update",
        pickle.dumps(("0.3.0", sent))[:-9]: "not a memory update",  # cut short
        pickle.dumps([__version__]): "not a memory update",
        pickle.dumps((__version__, {"groups": {}})): "not a memory update: a dict",
        pickle.dumps(("0.2.0", sent)): "of release '0.2.0'; this watcher is",
    }
    for body, named in refused.items():
        with pytest.raises(MemoryUpdateRefused, match=named):
            decode_memory_update(body)


def test_the_services_problems_are_told_when_they_change_and_shown_beside_the_watchers() -> None:
    ledger, watcher, problems = Ledger(), InMemoryWatcher(), ["Kafka token: HTTP 401"]
    relay = relay_of(ledger, watcher, {}, problems)
    assert asyncio.run(relay.tell())
    assert watcher.updates[-1].problems == ("Kafka token: HTTP 401",)
    assert asyncio.run(relay.tell())
    assert len(watcher.updates) == 1  # unchanged: not told again
    problems.clear()
    assert asyncio.run(relay.tell())
    assert watcher.updates[-1].problems == ()  # gone: told too

    memory = WatcherMemory(Ledger(), lambda _g, _r: None)
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[0])))
    own = {"kafka": "Kafka token: HTTP 401", "issuer": "jobs' token issuer: unreachable"}
    runtime = Runtime(
        Settings(),
        SidecarMetrics(CollectorRegistry()),
        time.time,
        None,  # type: ignore[arg-type]
        identity_problems=(lambda: own.get("kafka"), lambda: own.get("issuer")),
        service_problems=lambda: memory.problems,
    )
    assert runtime.problems() == ["Kafka token: HTTP 401", "jobs' token issuer: unreachable"]
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))
    own.clear()
    assert runtime.problems() == []


def test_a_replicas_groups_are_told_when_they_change_and_only_those_are_its_watchers() -> None:
    teller = Ledger()
    for group in ("a", "b", "c"):
        progress(teller, group, 1, 10)
    teller.commit_only({"a"})  # its leases
    watcher = InMemoryWatcher()
    relay = MemoryRelay(
        teller, watcher, waiting=lambda _g: None, job=lambda _g: None,
        owned=lambda: teller.committing, replica="host-1-abc",
    )  # fmt: skip
    mine = Ledger(groups=[GroupState(g, query_id=f"q-{g}") for g in ("a", "b", "c")])
    mine.commit_only(set())  # as a replica's watcher starts: nothing until told
    wakes: list[None] = []
    publishes_as: list[str] = []
    memory = WatcherMemory(
        mine, lambda _g, _j: None, watch_more=lambda: wakes.append(None),
        publish_as=publishes_as.append,
    )  # fmt: skip

    assert asyncio.run(relay.tell())
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))  # over the wire
    assert watcher.updates[-1].owned == {"a"}
    assert [g for g in "abc" if mine.commits(g)] == ["a"]
    assert len(wakes) == 1, "a group taken: its log ends read now"
    assert publishes_as == ["host-1-abc"], "a whole message names the replica"

    assert asyncio.run(relay.tell())
    assert len(watcher.updates) == 1, "nothing changed: nothing told"

    teller.commit_only({"b", "c"})  # a's lease lost, b's and c's taken
    assert asyncio.run(relay.tell())
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))
    assert watcher.updates[-1].owned == {"b", "c"}
    assert [g for g in "abc" if mine.commits(g)] == ["b", "c"]
    assert len(wakes) == 2
    teller.commit_only({"b"})  # c's lease lost: nothing new to read
    assert asyncio.run(relay.tell())
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))
    assert [g for g in "abc" if mine.commits(g)] == ["b"]
    assert len(wakes) == 2
    assert publishes_as == ["host-1-abc"], "partial messages leave the replica as told"
    # Every message names it: a paired watcher takes none from another replica.
    assert all(m.replica == "host-1-abc" for m in watcher.updates[1:])
    watcher.started_again()  # told everything, the replica too
    assert asyncio.run(relay.tell())
    assert (watcher.updates[-1].whole, watcher.updates[-1].replica) == (True, "host-1-abc")

    alone = InMemoryWatcher()
    single = MemoryRelay(Ledger(), alone, waiting=lambda _g: None, job=lambda _g: None)
    assert asyncio.run(single.tell())  # one process: its watcher evaluates every group
    assert (alone.updates[-1].owned, alone.updates[-1].replica) == (None, None)


def test_a_replicas_watcher_holding_only_its_groups_reads_a_taken_one_then_watches_it() -> None:
    """``follows_owned`` (a replica's watcher whose store follower holds its replica's
    groups only): what it wants is what it was last told its replica's; a group told of
    that it does not want never wakes the follower; a group taken that the ledger does not
    hold yet wakes the follower, and the lag monitor once the follower read it."""
    teller = Ledger()
    for group in ("a", "b", "c"):
        progress(teller, group, 1, 10)
    teller.commit_only({"a"})
    watcher = InMemoryWatcher()
    relay = MemoryRelay(
        teller, watcher, waiting=lambda _g: None, job=lambda _g: None,
        owned=lambda: teller.committing, replica="r1",
    )  # fmt: skip
    mine = Ledger()  # holds nothing before told
    mine.commit_only(set())
    events: list[str] = []
    memory = WatcherMemory(
        mine, lambda _g, _j: None, unknown=lambda: events.append("follower"),
        watch_more=lambda: events.append("lag monitor"), follows_owned=True,
    )  # fmt: skip
    assert memory.wanted() == frozenset()

    assert asyncio.run(relay.tell())  # a, b and c told of; a is the replica's
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))
    assert memory.wanted() == {"a"}
    assert events == ["follower"], "a, not held yet: read it first (b and c: not wanted)"
    memory.refreshed(["b"])  # a step that did not read a yet
    assert events == ["follower"]
    mine.groups["a"] = GroupState("a", query_id="q-a")  # as the follower's step reads it
    memory.refreshed(["a"])
    assert events == ["follower", "lag monitor"], "read: its log ends now"
    memory.refreshed(["a"])
    assert events == ["follower", "lag monitor"], "once"

    progress(teller, "b", 2, 20)  # b's memory changes: told, still not wanted
    assert asyncio.run(relay.tell())
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))
    assert events == ["follower", "lag monitor"]

    assert teller.take("a", 100.0) is not None  # a commit of a in flight, told with it
    teller.commit_only({"b"})  # a's lease lost, b's taken
    assert asyncio.run(relay.tell())
    memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))
    assert memory.wanted() == {"b"}
    assert mine.groups["a"].in_flight is None, "a let go at the next step, not held"
    assert events == ["follower", "lag monitor", "follower"]
    assert WatcherMemory(Ledger(), lambda _g, _j: None).wanted() is None  # one process: all


def test_events_of_no_known_group_are_told_when_they_change_and_each_take_is_signalled() -> None:
    """The outcomes of events of no known group (``Ledger.unattributed``) are the
    teller's memory too (the watcher exports them); ``told`` follows every message the
    watcher took (the service's /metrics is built anew), and none it did not take."""
    ledger = Ledger()
    progress(ledger, "a", 1, 10)
    watcher, told = InMemoryWatcher(), []
    relay = MemoryRelay(
        ledger, watcher, waiting=lambda _g: None, job=lambda _g: None, told=lambda: told.append(1)
    )
    assert asyncio.run(relay.tell())
    assert watcher.updates[-1].unattributed == {}
    assert len(told) == 1
    ledger.unattributed["unknown_query"] += 2
    assert asyncio.run(relay.tell())
    assert watcher.updates[-1].unattributed == {"unknown_query": 2}
    assert len(told) == 2
    assert asyncio.run(relay.tell())  # nothing changed: nothing told
    assert (len(watcher.updates), len(told)) == (2, 2)
    ledger.unattributed["unknown_query"] += 1
    watcher.down = True
    assert not asyncio.run(relay.tell())
    assert len(told) == 2
    watcher.down = False
    assert asyncio.run(relay.tell())
    assert watcher.updates[-1].whole
    assert watcher.updates[-1].unattributed == {"unknown_query": 3}
    memory = WatcherMemory(Ledger(), lambda _g, _j: None)
    for update in watcher.updates:
        if update.whole or memory.messages:
            memory.take(update)
    assert memory.unattributed == {"unknown_query": 3}


def test_a_replicas_watcher_exports_every_group_its_replica_counted_each_once() -> None:
    """Each replica takes events of every group and commits those it holds the leases of
    (tests/e2e/test_replicas.py's shape); its watcher holds only those (``follows_owned``):
    it exports the counters of every group its replica told it of, once each, and the
    commit series of its replica's groups alone, and moves them when a lease moves."""
    teller = Ledger()
    for group in ("a", "b"):
        progress(teller, group, 1, 10)
    request = teller.take("a", 100.0)
    assert request is not None
    teller.apply_change(teller.commit_result(request, now=101.0))
    teller.commit_only({"a"})
    watcher = InMemoryWatcher()
    relay = MemoryRelay(
        teller, watcher, waiting=lambda _g: None, job=lambda _g: None,
        owned=lambda: teller.committing, replica="host-1-abc",
    )  # fmt: skip
    mine = Ledger(groups=[teller.groups["a"].copy()])  # as its store follower holds it
    mine.commit_only(set())
    memory = WatcherMemory(mine, lambda _g, _j: None, follows_owned=True)
    exposition = FleetExposition(lambda: mine, lambda: None, memory, FleetOptions(max_age=0))

    def exported() -> list[str]:
        assert asyncio.run(relay.tell())
        memory.take(decode_memory_update(encode_memory_update(watcher.updates[-1])))
        text = asyncio.run(exposition.rendered())[0].decode()
        return [line for line in text.splitlines() if line and not line.startswith("#")]

    lines = exported()
    for group in ("a", "b"):
        counted = [
            s for s in lines if s.startswith(f'sidecar_events_total{{consumergroup="{group}"')
        ]
        assert counted == [f'sidecar_events_total{{consumergroup="{group}",outcome="accepted"}} 1']
        assert (
            f'sidecar_commits_succeeded_total{{consumergroup="{group}"}} {int(group == "a")}'
            in lines
        )
    last = "sidecar_last_successful_commit_timestamp_seconds"
    assert [s for s in lines if s.startswith(last)] == [f'{last}{{consumergroup="a"}} 101.0']

    teller.commit_only({"b"})  # a's lease lost, b's taken: b's commit series, a's counters
    mine.groups.pop("a")  # as the store follower lets a go
    mine.groups["b"] = teller.groups["b"].copy()
    lines = exported()
    assert 'sidecar_commits_succeeded_total{consumergroup="a"} 1' in lines
    assert not [s for s in lines if s.startswith(last)], "b has no commit yet, a is not its"
    assert 'sidecar_pending_checkpoints{consumergroup="b"} 0' in lines
    assert len(lines) == len(set(lines))
