"""How a replica's memory takes in stored groups (core.ledger.merge, ledger R11)."""

from __future__ import annotations

from dataclasses import replace

from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.ledger.merge import merge_group
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState, QueryState
from spark_offset_sidecar.core.offsets import TopicPartition

TP = TopicPartition("t", 0)


def _checkpoint(n: int, query: str = "q") -> Checkpoint:
    return Checkpoint(query, "g", n, "run", {TP: 10 * n}, float(n))


def _stored(slot: int | None = None, committed: int | None = None, at: float = 1.0) -> GroupState:
    group = GroupState("g", query_id="q")
    group.slot = _checkpoint(slot) if slot is not None else None
    if committed is not None:
        group.committed = CommittedOffsets("q", committed, {TP: 10 * committed}, at)
    return group


def test_a_group_new_to_memory_is_taken_as_stored() -> None:
    stored = _stored(slot=3)
    assert merge_group(None, stored) is stored


def test_the_stored_slot_that_is_in_flight_here_is_not_taken_again() -> None:
    mine = _stored(committed=2)
    mine.in_flight = CommitRequest(_checkpoint(3), {TP: 30}, attempt=1)
    merged = merge_group(mine, _stored(slot=3, committed=2))
    assert (merged.slot, merged.in_flight) == (None, mine.in_flight)


def test_a_completion_decided_elsewhere_queues_behind_the_commit_in_flight() -> None:
    mine = _stored(committed=2)
    mine.in_flight = CommitRequest(_checkpoint(3), {TP: 30}, attempt=1)
    mine.failures, mine.retry_at = 2, 99.0
    merged = merge_group(mine, _stored(slot=4, committed=2))
    assert merged.slot == _checkpoint(4)
    assert (merged.failures, merged.retry_at) == (0, 0.0)
    assert merged.in_flight == mine.in_flight


def test_memory_ahead_of_the_store_on_committed_offsets_stays_ahead() -> None:
    mine = _stored(committed=5, at=9.0)  # a success whose write failed
    merged = merge_group(mine, _stored(slot=5, committed=4, at=8.0))
    assert merged.committed == mine.committed
    assert merged.slot is None  # already committed


def test_the_same_slot_keeps_this_replicas_retry_timing() -> None:
    mine = _stored(slot=6)
    mine.failures, mine.retry_at, mine.last_failure = 3, 42.0, "broker_unavailable"
    mine.counters.succeeded = 7
    merged = merge_group(mine, _stored(slot=6))
    assert (merged.failures, merged.retry_at) == (3, 42.0)
    assert merged.last_failure == "broker_unavailable"
    assert merged.counters.succeeded == 7


def test_a_rewind_handed_to_the_commit_in_flight_is_not_handed_out_again() -> None:
    mine = _stored()
    mine.in_flight = CommitRequest(_checkpoint(1), {TP: 10}, attempt=1, rewind=True)
    assert not merge_group(mine, replace(_stored(slot=1), rewind_allowed=True)).rewind_allowed
    assert merge_group(_stored(), replace(_stored(), rewind_allowed=True)).rewind_allowed


def test_refresh_replaces_queries_and_drops_what_is_not_stored() -> None:
    ledger = Ledger()
    ledger.queries["gone"] = QueryState("gone", "h", 0.0)
    stored_query = QueryState("q", "g", 0.0, last_completed_id=7)
    ledger.refresh({"q", "gone"}, {"g", "h"}, [stored_query], [_stored(slot=8)])
    assert ledger.queries == {"q": stored_query}
    assert set(ledger.groups) == {"g"}
    assert ledger.ready_groups(0.0) == ["g"]


def test_a_replica_takes_only_the_groups_it_commits() -> None:
    ledger = Ledger(groups=[_stored(slot=1), replace(_stored(slot=1), group_id="other")])
    ledger.commit_only(set())
    assert ledger.ready_groups(0.0) == []
    assert ledger.take("g", 0.0) is None
    assert ledger.next_retry_at() is None  # nothing to wake the commit loop for
    ledger.commit_only({"g"})
    assert ledger.ready_groups(0.0) == ["g"]
    request = ledger.take("g", 0.0, fence=5)
    assert request is not None
    assert request.fence == 5
    ledger.commit_only(None)
    assert ledger.ready_groups(0.0) == ["other"]


def test_the_stored_commit_interval_stands_and_this_replicas_timing_stays() -> None:
    mine = _stored(slot=3)
    mine.interval_from = 7.0
    stored = _stored(slot=3)
    stored.commit_interval = 5.0
    merged = merge_group(mine, stored)
    assert (merged.commit_interval, merged.interval_from) == (5.0, 7.0)
