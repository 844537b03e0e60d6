"""Every rule of the ledger (R1-R9, R12; R10-R11 have their own files) and every phase
transition, one by one."""

from __future__ import annotations

import pytest

from spark_offset_sidecar.core.backoff import Backoff
from spark_offset_sidecar.core.ledger.changes import CommitRequest, Outcome
from spark_offset_sidecar.core.ledger.rules import GroupPhase, Ledger
from spark_offset_sidecar.core.offsets import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def offsets(a: int, b: int) -> dict[TopicPartition, int]:
    return {T0: a, T1: b}


def progress(ledger: Ledger, batch: int, a: int, b: int, q: str = "q", g: str = "g") -> Outcome:
    decision = ledger.decide_progress(q, g, "run-1", batch, offsets(a, b), now=float(batch))
    ledger.apply(decision)
    return decision.outcome


def snapshot(ledger: Ledger, cp: int, a: int, b: int, run: str = "run-1") -> Outcome:
    decision = ledger.decide_snapshot("q", "g", cp, run, offsets(a, b), now=0.0)
    ledger.apply(decision)
    return decision.outcome


def complete(ledger: Ledger, cp: int) -> Outcome:
    decision = ledger.decide_complete("q", cp, now=0.0)
    ledger.apply(decision)
    return decision.outcome


def take(ledger: Ledger, now: float = 0.0) -> CommitRequest | None:
    return ledger.take("g", now)


def finish(ledger: Ledger, request: CommitRequest, failure: str | None = None) -> None:
    ledger.apply_change(ledger.commit_result(request, now=10.0, failure=failure))


# --- R1 ownership ----------------------------------------------------------------------


def test_second_query_on_a_group_is_refused_and_counted() -> None:
    ledger = Ledger()
    assert progress(ledger, 0, 1, 1, q="q1") is Outcome.ACCEPTED
    decision = ledger.decide_progress("q2", "g", "r", 5, offsets(9, 9), now=1.0)
    assert decision.outcome is Outcome.CONFLICT
    assert "belongs to query q1" in decision.detail
    assert decision.changes == ()
    ledger.apply(decision)
    assert ledger.groups["g"].counters.events["conflict"] == 1
    assert ledger.groups["g"].slot is not None
    assert ledger.groups["g"].slot.query_id == "q1"


def test_a_query_cannot_switch_groups() -> None:
    ledger = Ledger()
    progress(ledger, 0, 1, 1, g="g1")
    decision = ledger.decide_progress("q", "g2", "r", 1, offsets(2, 2), now=1.0)
    assert decision.outcome is Outcome.CONFLICT
    assert "commits to group 'g1'" in decision.detail


def test_release_frees_the_group_for_another_query_and_keeps_committed_offsets() -> None:
    ledger = Ledger()
    progress(ledger, 0, 5, 5, q="old")
    request = take(ledger)
    assert request is not None
    finish(ledger, request)
    ledger.apply(ledger.decide_release("old"))
    assert "old" not in ledger.queries
    assert progress(ledger, 0, 6, 6, q="new") is Outcome.ACCEPTED
    assert ledger.groups["g"].committed is not None
    assert ledger.groups["g"].committed.offsets == offsets(5, 5)
    assert ledger.decide_release("nobody").outcome is Outcome.UNKNOWN_QUERY


# --- R2 pending order and bound --------------------------------------------------------


def test_pending_kept_in_id_order_even_when_snapshots_arrive_out_of_order() -> None:
    ledger = Ledger()
    for cp in (5, 2, 9, 3):
        assert snapshot(ledger, cp, cp, cp) is Outcome.ACCEPTED
    assert list(ledger.queries["q"].pending) == [2, 3, 5, 9]


def test_pending_bounded_oldest_dropped_and_counted() -> None:
    ledger = Ledger(max_pending=3)
    for cp in range(5):
        snapshot(ledger, cp, cp, cp)
    assert list(ledger.queries["q"].pending) == [2, 3, 4]
    assert ledger.groups["g"].counters.pending_dropped == 2


def test_max_pending_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_pending"):
        Ledger(max_pending=0)


# --- R3 stale guard ----------------------------------------------------------------------


def test_older_and_equal_events_after_completion_change_nothing() -> None:
    ledger = Ledger()
    progress(ledger, 7, 70, 70)
    assert progress(ledger, 7, 70, 70) is Outcome.DUPLICATE
    assert progress(ledger, 3, 30, 30) is Outcome.STALE
    assert snapshot(ledger, 6, 60, 60) is Outcome.STALE
    assert complete(ledger, 7) is Outcome.DUPLICATE
    slot = ledger.groups["g"].slot
    assert slot is not None
    assert slot.checkpoint_id == 7
    assert slot.offsets == offsets(70, 70)
    assert ledger.queries["q"].pending == {}


# --- R4 snapshot identity ----------------------------------------------------------------


def test_resnapshot_same_offsets_is_duplicate_other_offsets_conflict_or_replace() -> None:
    ledger = Ledger()
    snapshot(ledger, 1, 10, 10, run="a")
    assert snapshot(ledger, 1, 10, 10, run="a") is Outcome.DUPLICATE
    assert snapshot(ledger, 1, 11, 11, run="a") is Outcome.CONFLICT
    assert snapshot(ledger, 1, 12, 12, run="b") is Outcome.ACCEPTED
    assert ledger.queries["q"].pending[1].offsets == offsets(12, 12)
    assert ledger.groups["g"].counters.pending_dropped == 0


# --- R5 completion -----------------------------------------------------------------------


def test_complete_removes_it_and_every_older_entry_and_fills_the_slot() -> None:
    ledger = Ledger()
    for cp in (1, 2, 3, 4):
        snapshot(ledger, cp, cp * 10, cp * 10)
    assert complete(ledger, 3) is Outcome.ACCEPTED
    assert list(ledger.queries["q"].pending) == [4]
    slot = ledger.groups["g"].slot
    assert slot is not None
    assert (slot.checkpoint_id, slot.offsets) == (3, offsets(30, 30))


def test_complete_of_an_unknown_checkpoint_changes_nothing_and_is_counted() -> None:
    ledger = Ledger()
    snapshot(ledger, 4, 4, 4)
    decision = ledger.decide_complete("q", 9, now=0.0)
    assert decision.outcome is Outcome.UNKNOWN_CHECKPOINT
    assert "pending: [4]" in decision.detail
    ledger.apply(decision)
    assert list(ledger.queries["q"].pending) == [4]
    assert ledger.groups["g"].slot is None
    assert ledger.groups["g"].counters.events["unknown_checkpoint"] == 1
    assert ledger.decide_complete("nobody", 1, now=0.0).outcome is Outcome.UNKNOWN_QUERY


def test_empty_offsets_are_ignored() -> None:
    ledger = Ledger()
    assert ledger.decide_progress("q", "g", "r", 0, {}, 0.0).outcome is Outcome.IGNORED
    assert ledger.decide_snapshot("q", "g", 0, "r", {}, 0.0).outcome is Outcome.IGNORED


# --- R6 phases: the transition table ----------------------------------------------------


def test_transition_table() -> None:
    ledger = Ledger()
    group = lambda: ledger.groups["g"]  # noqa: E731
    progress(ledger, 1, 1, 1)
    assert group().phase is GroupPhase.READY
    progress(ledger, 2, 2, 2)  # READY --complete--> READY, skip
    assert (group().phase, group().counters.skipped) == (GroupPhase.READY, 1)
    first = take(ledger)  # READY --take--> IN_FLIGHT
    assert first is not None
    assert first.checkpoint_id == 2
    assert group().phase is GroupPhase.IN_FLIGHT
    assert take(ledger) is None  # one in flight at most
    finish(ledger, first)  # IN_FLIGHT --success--> IDLE
    assert group().phase is GroupPhase.IDLE
    assert take(ledger) is None
    progress(ledger, 3, 3, 3)  # IDLE --complete--> READY
    second = take(ledger)
    assert second is not None
    progress(ledger, 4, 4, 4)  # IN_FLIGHT --complete--> IN_FLIGHT_NEXT
    assert group().phase is GroupPhase.IN_FLIGHT_NEXT
    progress(ledger, 5, 5, 5)  # IN_FLIGHT_NEXT --complete--> IN_FLIGHT_NEXT, skip
    assert (group().phase, group().counters.skipped) == (GroupPhase.IN_FLIGHT_NEXT, 2)
    finish(ledger, second)  # IN_FLIGHT_NEXT --success--> READY
    assert group().phase is GroupPhase.READY
    third = take(ledger)
    assert third is not None
    assert third.checkpoint_id == 5
    progress(ledger, 6, 6, 6)
    finish(ledger, third, failure="timeout")  # IN_FLIGHT_NEXT --failure--> READY (dropped)
    assert group().phase is GroupPhase.READY
    slot = group().slot
    assert slot is not None
    assert slot.checkpoint_id == 6
    fourth = take(ledger)
    assert fourth is not None
    finish(ledger, fourth, failure="timeout")  # IN_FLIGHT --failure--> READY after backoff
    assert group().phase is GroupPhase.READY
    assert group().counters.failed["timeout"] == 2
    assert group().counters.succeeded == 2


# --- R7 no rewind ------------------------------------------------------------------------


def test_partitions_are_held_at_the_committed_offset_unless_a_rewind_is_allowed() -> None:
    ledger = Ledger()
    snapshot(ledger, 1, 100, 100)
    complete(ledger, 1)
    request = take(ledger)
    assert request is not None
    finish(ledger, request)
    ledger.apply(ledger.decide_release("q"))
    progress(ledger, 0, 50, 150, q="q2")  # t/0 would move back 100 -> 50
    held = take(ledger)
    assert held is not None
    assert held.offsets == offsets(100, 150)
    assert held.held_back == (T0,)
    finish(ledger, held)
    assert ledger.groups["g"].counters.held_back == 1

    ledger.apply(ledger.decide_allow_rewind("g"))
    progress(ledger, 1, 40, 160, q="q2")
    rewound = take(ledger)
    assert rewound is not None
    assert rewound.offsets == offsets(40, 160)
    finish(ledger, rewound, failure="timeout")
    assert ledger.groups["g"].rewind_allowed, "a failed rewind keeps its permission"
    retry = take(ledger, now=1e9)
    assert retry is not None
    assert retry.offsets == offsets(40, 160)
    finish(ledger, retry)
    assert not ledger.groups["g"].rewind_allowed, "the permission is used up"
    assert ledger.decide_allow_rewind("nope").outcome is Outcome.UNKNOWN_QUERY


# --- R8 results --------------------------------------------------------------------------


def test_failure_is_retried_after_backoff_when_nothing_newer_arrives() -> None:
    ledger = Ledger(backoff=Backoff(initial=1.0, cap=4.0))
    progress(ledger, 1, 10, 10)
    attempt = take(ledger, now=0.0)
    delays = []
    for _ in range(4):
        assert attempt is not None
        ledger.apply_change(ledger.commit_result(attempt, now=100.0, failure="broker_unavailable"))
        retry_at = ledger.groups["g"].retry_at
        delays.append(retry_at - 100.0)
        assert ledger.ready_groups(retry_at - 0.01) == []
        assert ledger.next_retry_at() == retry_at
        assert ledger.ready_groups(retry_at) == ["g"]
        attempt = take(ledger, now=retry_at)
    assert delays == [1.0, 2.0, 4.0, 4.0]
    assert attempt is not None
    assert attempt.attempt == 5
    finish(ledger, attempt)
    group = ledger.groups["g"]
    assert group.committed is not None
    assert group.committed.offsets == offsets(10, 10)
    assert (group.failures, group.last_failure) == (0, None)


def test_a_new_completion_ends_the_backoff() -> None:
    ledger = Ledger(backoff=Backoff(initial=30.0, cap=30.0))
    progress(ledger, 1, 10, 10)
    attempt = take(ledger)
    assert attempt is not None
    finish(ledger, attempt, failure="timeout")
    assert ledger.ready_groups(now=11.0) == []
    progress(ledger, 2, 20, 20)
    assert ledger.ready_groups(now=11.0) == ["g"]


def test_success_merges_partitions_the_newest_checkpoint_does_not_name() -> None:
    ledger = Ledger()
    progress(ledger, 1, 10, 10)
    first = take(ledger)
    assert first is not None
    finish(ledger, first)
    ledger.apply(ledger.decide_progress("q", "g", "r", 2, {T0: 20}, now=2.0))
    second = take(ledger)
    assert second is not None
    finish(ledger, second)
    committed = ledger.groups["g"].committed
    assert committed is not None
    assert committed.offsets == offsets(20, 10)
    assert committed.checkpoint_id == 2


def test_only_events_are_counted_as_events_not_commit_steps() -> None:
    ledger = Ledger()
    progress(ledger, 1, 1, 1)
    request = take(ledger)
    assert request is not None
    finish(ledger, request)
    progress(ledger, 1, 1, 1)
    assert dict(ledger.groups["g"].counters.events) == {"accepted": 1, "duplicate": 1}


# --- R9 retention ------------------------------------------------------------------------


def test_an_idle_group_commits_its_offsets_again_before_retention_drops_them() -> None:
    ledger = Ledger(refresh_after=100.0)
    progress(ledger, 1, 10, 11)  # at now=1.0
    first = take(ledger, now=1.0)
    assert first is not None
    ledger.apply_change(ledger.commit_result(first, now=2.0))
    assert ledger.ready_groups(now=101.9) == []
    assert ledger.next_retry_at() == 102.0
    assert ledger.ready_groups(now=102.0) == ["g"]
    again = take(ledger, now=102.0)
    assert again is not None
    assert again.refresh
    assert again.offsets == offsets(10, 11)
    assert again.checkpoint_id == 1, "the same checkpoint, the same offsets"
    assert take(ledger, now=103.0) is None, "one in flight"
    ledger.apply_change(ledger.commit_result(again, now=103.0))
    group = ledger.groups["g"]
    assert group.counters.refreshed == 1
    assert group.committed is not None
    assert group.committed.at == 103.0
    assert ledger.ready_groups(now=202.9) == [], "no more often than needed"


def test_no_refresh_while_there_is_something_newer_or_no_owner() -> None:
    ledger = Ledger(refresh_after=10.0)
    progress(ledger, 1, 10, 10)
    first = take(ledger)
    assert first is not None
    ledger.apply_change(ledger.commit_result(first, now=0.0))
    progress(ledger, 2, 20, 20)
    newer = take(ledger, now=50.0)
    assert newer is not None
    assert not newer.refresh
    ledger.apply_change(ledger.commit_result(newer, now=50.0))
    ledger.apply(ledger.decide_release("q"))
    assert ledger.ready_groups(now=1e9) == [], "a released group is nobody's to refresh"
    assert Ledger().ready_groups(now=1e9) == []


def test_a_failed_refresh_is_retried_like_any_commit() -> None:
    ledger = Ledger(refresh_after=10.0, backoff=Backoff(initial=1.0, cap=30.0))
    progress(ledger, 1, 10, 10)
    first = take(ledger)
    assert first is not None
    ledger.apply_change(ledger.commit_result(first, now=0.0))
    refresh = take(ledger, now=10.0)
    assert refresh is not None
    ledger.apply_change(ledger.commit_result(refresh, now=10.0, failure="timeout"))
    retry = take(ledger, now=11.0)
    assert retry is not None
    assert retry.offsets == offsets(10, 10)


# --- R12 repair after a takeover ---------------------------------------------------------


def committed_once(ledger: Ledger) -> None:
    progress(ledger, 1, 10, 11)
    first = take(ledger, now=1.0)
    assert first is not None
    ledger.apply_change(ledger.commit_result(first, now=2.0))


def test_a_repaired_group_commits_its_stored_offsets_again_at_once_then_no_more() -> None:
    ledger = Ledger()  # no R9 refresh configured: a repair needs none
    committed_once(ledger)
    assert ledger.ready_groups(now=3.0) == []
    assert ledger.repair("g")
    assert ledger.ready_groups(now=3.0) == ["g"]
    again = take(ledger, now=3.0)
    assert again is not None
    assert again.refresh
    assert (again.offsets, again.checkpoint_id) == (offsets(10, 11), 1)
    ledger.apply_change(ledger.commit_result(again, now=4.0))
    assert ledger.ready_groups(now=1e9) == [], "one repair, one commit"
    assert ledger.next_retry_at() is None


def test_a_failed_repair_is_retried_until_it_succeeds() -> None:
    ledger = Ledger(backoff=Backoff(initial=1.0, cap=30.0))
    committed_once(ledger)
    assert ledger.repair("g")
    attempt = take(ledger, now=3.0)
    assert attempt is not None
    ledger.apply_change(ledger.commit_result(attempt, now=3.0, failure="timeout"))
    retry = take(ledger, now=4.0)
    assert retry is not None
    assert retry.offsets == offsets(10, 11)
    ledger.apply_change(ledger.commit_result(retry, now=5.0))
    assert ledger.ready_groups(now=1e9) == []


def test_no_repair_when_a_commit_follows_anyway_or_nothing_is_stored_or_owned() -> None:
    assert not Ledger().repair("g"), "unknown group"
    ledger = Ledger()
    progress(ledger, 1, 10, 11)
    assert not ledger.repair("g"), "nothing committed yet: the slot's commit comes anyway"
    first = take(ledger, now=1.0)
    assert first is not None
    assert not ledger.repair("g"), "a commit in flight"
    ledger.apply_change(ledger.commit_result(first, now=2.0))
    progress(ledger, 2, 20, 21)
    assert not ledger.repair("g"), "a newer slot commits anyway"
    newer = take(ledger, now=3.0)
    assert newer is not None
    assert newer.offsets == offsets(20, 21)
    ledger.apply_change(ledger.commit_result(newer, now=4.0))
    ledger.commit_only(set())
    assert not ledger.repair("g"), "another replica's group"
    assert ledger.ready_groups(now=1e9) == []


def test_a_repair_ends_with_the_ownership_it_was_made_for() -> None:
    ledger = Ledger()
    committed_once(ledger)
    ledger.commit_only({"g"})
    assert ledger.repair("g")
    ledger.commit_only(set())  # the group moved to another replica before the repair ran
    ledger.commit_only({"g"})  # back again later: a new takeover reads back anew
    assert ledger.ready_groups(now=1e9) == []
