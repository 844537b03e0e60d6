"""The ledger against the Flink reference model, driven by random event sequences.

Where Flink's own use of the protocol applies (checkpoint ids increase, one query, one
group) the two must agree step by step. Deliberate improvements are named and checked on
their own:

  IDLE_RETRY   a failed commit is put back and retried when nothing newer arrived; Flink
               drops it and waits for the next checkpoint (an idle Spark query sends none).
  STALE_GUARD  a snapshot or completion older than the last completed checkpoint changes
               nothing; Flink's insertion-ordered map would queue it and commit it.
  NO_REWIND    a partition never moves backwards in the committed offsets.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
from tests.support.flink_reference import FlinkConsumer
from tests.support.fuzz import examples

QUERY, GROUP = "q-1", "g-1"
PARTITIONS = [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)]


@dataclass(frozen=True)
class Snapshot:
    checkpoint_id: int
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class Complete:
    checkpoint_id: int


@dataclass(frozen=True)
class Take:
    pass


@dataclass(frozen=True)
class Finish:
    success: bool


def _offsets(values: tuple[int, ...]) -> dict[TopicPartition, int]:
    return dict(zip(PARTITIONS, values, strict=True))


class Harness:
    """Drives the ledger the way the service does: decide, then apply."""

    def __init__(self, max_pending: int) -> None:
        self.ledger = Ledger(max_pending=max_pending)
        self.now = 0.0
        self.in_flight = None
        self.committed_history: list[dict[TopicPartition, int]] = []

    def snapshot(self, checkpoint_id: int, offsets: dict[TopicPartition, int]) -> None:
        decision = self.ledger.decide_snapshot(QUERY, GROUP, checkpoint_id, "r", offsets, self.now)
        self.ledger.apply(decision)

    def complete(self, checkpoint_id: int) -> None:
        self.ledger.apply(self.ledger.decide_complete(QUERY, checkpoint_id, self.now))

    def take(self):  # type: ignore[no-untyped-def]
        request = self.ledger.take(GROUP, self.now)
        if request is not None:
            self.in_flight = request
        return request

    def finish(self, success: bool) -> None:
        assert self.in_flight is not None
        change = self.ledger.commit_result(
            self.in_flight, self.now, None if success else "broker_unavailable"
        )
        self.ledger.apply_change(change)
        self.in_flight = None
        group = self.ledger.groups[GROUP]
        if group.committed is not None:
            self.committed_history.append(dict(group.committed.offsets))

    def advance(self, seconds: float) -> None:
        self.now += seconds


def monotonic_streams(max_id: int = 30):  # type: ignore[no-untyped-def]
    """Flink's own usage: snapshots with increasing ids and non-decreasing offsets,
    completions of any id (known, unknown, repeated), commits taken and finished."""

    @st.composite
    def build(draw):  # type: ignore[no-untyped-def]
        steps = draw(st.lists(st.integers(0, 9), min_size=1, max_size=80))
        next_id, offsets, events, snapshotted = 0, (0, 0, 0), [], []
        for step in steps:
            if step <= 3:
                next_id += draw(st.integers(1, 3))
                offsets = tuple(o + draw(st.integers(0, 5)) for o in offsets)
                events.append(Snapshot(next_id, offsets))
                snapshotted.append(next_id)
            elif step <= 6:
                # Mostly a checkpoint that was snapshotted (so commits happen), sometimes
                # any id (unknown, already completed, not yet snapshotted).
                if snapshotted and draw(st.integers(0, 3)) > 0:
                    events.append(Complete(draw(st.sampled_from(snapshotted[-4:]))))
                else:
                    events.append(Complete(draw(st.integers(0, max(next_id, 1)))))
            elif step <= 8:
                events.append(Take())
            else:
                events.append(Finish(True))
        return events

    return build()


def _assert_same(harness: Harness, flink: FlinkConsumer) -> None:
    ledger = harness.ledger
    query = ledger.queries.get(QUERY)
    pending = {i: dict(c.offsets) for i, c in query.pending.items()} if query else {}
    assert pending == flink.pending
    group = ledger.groups.get(GROUP)
    slot = (group.slot.checkpoint_id, dict(group.slot.offsets)) if group and group.slot else None
    assert slot == flink.next_offsets_to_commit
    flight = (
        (group.in_flight.checkpoint_id, dict(group.in_flight.offsets))
        if group and group.in_flight
        else None
    )
    assert flight == flink.commit_in_progress
    committed = dict(group.committed.offsets) if group and group.committed else {}
    assert committed == flink.committed
    counters = group.counters if group else None
    assert (counters.succeeded if counters else 0) == flink.commits_succeeded
    assert (counters.skipped if counters else 0) == flink.skipped
    # Flink's "unknown checkpoint id" is, in ours: not pending, already completed (stale or
    # duplicate), or no query yet (before its first snapshot).
    unknown = ledger.unattributed["unknown_query"]
    if counters is not None:
        unknown += sum(counters.events[o] for o in ("unknown_checkpoint", "stale", "duplicate"))
    assert unknown == flink.unknown_completions


@settings(max_examples=examples(400), deadline=None)
@given(events=monotonic_streams(), max_pending=st.integers(1, 8))
def test_matches_flink_step_by_step_on_flinks_own_usage(events, max_pending) -> None:  # type: ignore[no-untyped-def]
    harness, flink = Harness(max_pending), FlinkConsumer(max_pending=max_pending)
    for event in events:
        match event:
            case Snapshot(checkpoint_id, offsets):
                harness.snapshot(checkpoint_id, _offsets(offsets))
                flink.snapshot_state(checkpoint_id, _offsets(offsets))
            case Complete(checkpoint_id):
                harness.complete(checkpoint_id)
                flink.notify_checkpoint_complete(checkpoint_id)
            case Take():
                ours, theirs = harness.take(), flink.run_loop_iteration()
                assert (ours is None) == (theirs is None)
            case Finish(success) if harness.in_flight is not None:
                harness.finish(success)
                flink.on_commit_complete(success)
        _assert_same(harness, flink)


@settings(max_examples=examples(300), deadline=None)
@given(events=monotonic_streams(), failures=st.lists(st.booleans(), min_size=80, max_size=80))
def test_idle_retry_is_the_only_difference_when_commits_fail(events, failures) -> None:  # type: ignore[no-untyped-def]
    """IDLE_RETRY: after a failure with nothing newer, ours holds the failed offsets in the
    slot (Flink: empty slot) and commits them again. So ours may still be retrying an older
    checkpoint when Flink, idle, already commits a newer one; ours then holds that newer one
    in its slot. Nothing else differs, and once drained ours has committed the newest."""
    harness, flink = Harness(100), FlinkConsumer()
    newest: tuple[int, dict[TopicPartition, int]] | None = None
    for index, event in enumerate(events):
        match event:
            case Snapshot(checkpoint_id, offsets):
                harness.snapshot(checkpoint_id, _offsets(offsets))
                flink.snapshot_state(checkpoint_id, _offsets(offsets))
            case Complete(checkpoint_id):
                if checkpoint_id in flink.pending:
                    newest = (checkpoint_id, flink.pending[checkpoint_id])
                harness.complete(checkpoint_id)
                flink.notify_checkpoint_complete(checkpoint_id)
            case Take():
                harness.advance(60.0)  # past any backoff
                ours = harness.take()
                theirs = flink.run_loop_iteration()
                if theirs is not None and ours is not None:
                    assert (ours.checkpoint_id, dict(ours.offsets)) == theirs
                elif theirs is not None:  # ours is busy retrying what Flink dropped
                    group = harness.ledger.groups[GROUP]
                    assert group.in_flight is not None
                    assert group.in_flight.attempt > 1
                    assert group.in_flight.checkpoint_id < theirs[0]
                    assert group.slot is not None
                    assert group.slot.checkpoint_id == theirs[0]
            case Finish():
                success = failures[index]
                if harness.in_flight is not None:
                    group = harness.ledger.groups[GROUP]
                    nothing_newer = group.slot is None
                    retried = harness.in_flight
                    harness.finish(success)
                    if not success and nothing_newer:
                        assert group.slot is not None
                        assert group.slot.checkpoint_id == retried.checkpoint_id
                if flink.commit_in_progress is not None:
                    flink.on_commit_complete(success)
        group = harness.ledger.groups.get(GROUP)
        if group is not None and flink.next_offsets_to_commit is not None:
            assert group.slot is not None
            assert group.slot.checkpoint_id == flink.next_offsets_to_commit[0]
    for _ in range(4):  # drain with a healthy broker
        harness.advance(60.0)
        if harness.in_flight is not None or harness.take() is not None:
            harness.finish(True)
    if newest is not None:
        group = harness.ledger.groups[GROUP]
        assert group.committed is not None
        assert group.committed.checkpoint_id == newest[0]
        assert dict(group.committed.offsets) == newest[1]


@st.composite
def chaotic_streams(draw):  # type: ignore[no-untyped-def]
    """Replays, reordering and duplicates as retries and restarts produce them."""
    events = []
    for _ in range(draw(st.integers(1, 80))):
        kind = draw(st.integers(0, 9))
        checkpoint_id = draw(st.integers(0, 20))
        if kind <= 3:
            offsets = tuple(checkpoint_id * 10 + draw(st.integers(0, 3)) for _ in PARTITIONS)
            events.append(Snapshot(checkpoint_id, offsets))
        elif kind <= 6:
            events.append(Complete(checkpoint_id))
        elif kind <= 8:
            events.append(Take())
        else:
            events.append(Finish(draw(st.booleans())))
    return events


@settings(max_examples=examples(400), deadline=None)
@given(events=chaotic_streams())
def test_stale_guard_and_no_rewind_under_replays_and_reordering(events) -> None:  # type: ignore[no-untyped-def]
    """STALE_GUARD and NO_REWIND, and nothing newest is lost: once drained, the committed
    offsets are those of the newest completed checkpoint."""
    harness = Harness(100)
    completed: list[int] = []
    for event in events:
        match event:
            case Snapshot(checkpoint_id, offsets):
                harness.snapshot(checkpoint_id, _offsets(offsets))
            case Complete(checkpoint_id):
                before = harness.ledger.queries.get(QUERY)
                was_pending = before is not None and checkpoint_id in before.pending
                harness.complete(checkpoint_id)
                if was_pending:
                    assert not completed or checkpoint_id > max(completed), "STALE_GUARD"
                    completed.append(checkpoint_id)
            case Take():
                harness.advance(60.0)
                harness.take()
            case Finish(success) if harness.in_flight is not None:
                harness.finish(success)
    history = harness.committed_history
    for before, after in itertools.pairwise(history):
        for tp, offset in before.items():
            assert after[tp] >= offset, "NO_REWIND"
    for _ in range(4):  # drain: finish what is in flight, then commit the slot
        harness.advance(60.0)
        if harness.in_flight is not None or harness.take() is not None:
            harness.finish(True)
    group = harness.ledger.groups.get(GROUP)
    if completed:
        assert group is not None
        assert group.committed is not None
        assert group.committed.checkpoint_id == max(completed)
        assert group.slot is None
        assert group.in_flight is None
