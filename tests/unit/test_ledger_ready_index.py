"""The ledger's ready index (R6, R8, R10, R11, R13): what ``ready_groups`` and
``next_retry_at`` answer from the heap always equals a full scan of the groups, through
completions, takes, successes, failures, rolled-back savepoints, interval changes and
changes of the groups this replica commits; and the heap stays bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
from tests.support.fuzz import examples
from tests.support.ledger_histories import GROUPS, QUERIES, Step, event, histories

T0 = TopicPartition("t", 0)
# (what, group, amount): 0 event, 1 take + success, 2 take + failure, 3 event rolled back,
# 4 set the group's interval, 5 commit only some groups, 6 time passes
actions = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 2), st.sampled_from([0.0, 0.5, 1.0, 2.5])),
    max_size=40,
)


def scan_ready(ledger: Ledger, now: float) -> set[str]:
    """R6, R11, R13 by looking at every group."""
    return {
        g.group_id
        for g in ledger.groups.values()
        if g.slot is not None
        and g.in_flight is None
        and ledger.commits(g.group_id)
        and ledger.ready_at(g) <= now
    }


def scan_next(ledger: Ledger, held: set[str]) -> float | None:
    return min(
        (
            ledger.ready_at(g)
            for g in ledger.groups.values()
            if g.slot is not None
            and g.in_flight is None
            and ledger.commits(g.group_id)
            and g.group_id not in held
        ),
        default=None,
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    interval=st.sampled_from([0.0, 1.0]),
    history=histories(max_size=12),
    steps=actions,
    held_step=histories(max_size=2),
    limit=st.integers(1, 3),
)
def test_the_ready_index_agrees_with_a_scan(
    interval: float,
    history: list[Step],
    steps: list[tuple[int, int, float]],
    held_step: list[Step],
    limit: int,
) -> None:
    ledger = Ledger(commit_interval=interval)
    now = 0.0
    for step in history:
        ledger.apply(event(ledger, step, now))
    for what, g, amount in steps:
        group = GROUPS[g]
        if what == 0:
            ledger.apply(event(ledger, (0, g, g, int(now * 2) + 20, int(now * 2)), now))
        elif what in (1, 2):
            request = ledger.take(group, now)
            if request is not None:
                failure = None if what == 1 else "timeout"
                ledger.apply_change(ledger.commit_result(request, now, failure))
        elif what == 3:
            decision = ledger.decide_progress(QUERIES[g], group, "r", 99, {T0: 99}, now)
            savepoint = ledger.savepoint(decision)
            ledger.apply(decision)
            ledger.rollback(savepoint)
        elif what == 4 and group in ledger.groups:
            ledger.apply(ledger.decide_commit_interval(group, amount or None))
        elif what == 5:
            ledger.commit_only(None if amount == 0.0 else GROUPS[: g + 1])
        else:
            now += amount
        for later in (now, now + 0.75, now + 10.0):
            assert set(ledger.ready_groups(later)) == scan_ready(ledger, later)
            assert len(ledger.ready_groups(later, limit)) == min(
                limit, len(scan_ready(ledger, later))
            )
        assert ledger.next_retry_at() == scan_next(ledger, set())

    # an open savepoint holds its group: neither ready nor what the committer waits for
    savepoints = []
    for step in held_step:
        decision = event(ledger, step, now)
        savepoints.append(ledger.savepoint(decision))
        ledger.apply(decision)
    held = {s.group_id for s in savepoints if s.group_id is not None}
    assert set(ledger.ready_groups(now + 10)) == scan_ready(ledger, now + 10) - held
    assert ledger.next_retry_at() == scan_next(ledger, held)
    for savepoint in reversed(savepoints):
        ledger.rollback(savepoint)
    assert set(ledger.ready_groups(now + 10)) == scan_ready(ledger, now + 10)


def test_a_group_taken_and_completed_at_one_instant_again_stays_ready() -> None:
    """The same ready time twice in a row (a coarse clock) still counts."""
    ledger = Ledger()
    for batch in range(4):
        ledger.apply(ledger.decide_progress("q", "g", "r", batch, {T0: batch}, 10.0))
        assert ledger.ready_groups(10.0) == ["g"], batch
        request = ledger.take("g", 10.0)
        assert request is not None
        ledger.apply_change(ledger.commit_result(request, 10.0))


def test_changing_a_groups_interval_moves_its_ready_time() -> None:
    ledger = Ledger(commit_interval=60.0)
    ledger.apply(ledger.decide_progress("q", "g", "r", 0, {T0: 0}, 0.0))
    request = ledger.take("g", 0.0)
    assert request is not None
    ledger.apply_change(ledger.commit_result(request, 0.0))
    ledger.apply(ledger.decide_progress("q", "g", "r", 1, {T0: 1}, 1.0))
    assert ledger.next_retry_at() == 60.0
    ledger.apply(ledger.decide_commit_interval("g", 2.0))
    assert ledger.next_retry_at() == 2.0
    assert ledger.ready_groups(2.0) == ["g"]


def test_the_ready_index_stays_bounded() -> None:
    ledger = Ledger(commit_interval=1.0)
    for batch in range(5000):
        now = batch * 0.1
        ledger.apply(ledger.decide_progress("q", "g", "r", batch, {T0: batch}, now))
        for group_id in ledger.ready_groups(now):
            request = ledger.take(group_id, now)
            assert request is not None
            ledger.apply_change(ledger.commit_result(request, now))
        ledger.apply(ledger.decide_commit_interval("g", 1.0 + (batch % 7)))
    assert len(ledger._retries._ready_heap) <= 2 * len(ledger.groups) + 65
