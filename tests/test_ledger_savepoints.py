"""R10: a decision applied under a savepoint and rolled back leaves the ledger exactly as
it was; while a savepoint is open its group is held (never taken); and the R9 refresh
index agrees with a full scan of the groups."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from service.changes import Decision
from service.ledger import Ledger
from service.offsets import TopicPartition

QUERIES = ("q0", "q1", "q2")
GROUPS = ("g0", "g1", "g2")


def event(ledger: Ledger, step: tuple[int, int, int, int, int], now: float) -> Decision:
    """One event drawn as (kind, query, group, checkpoint id, offset)."""
    kind, q, g, checkpoint_id, offset = step
    query, group = QUERIES[q], GROUPS[g]
    offsets = {TopicPartition("t", 0): offset, TopicPartition("t", 1): offset + 1}
    if kind <= 3:
        return ledger.decide_progress(query, group, "run", checkpoint_id, offsets, now)
    if kind <= 5:
        return ledger.decide_snapshot(query, group, checkpoint_id, "run", offsets, now)
    if kind <= 7:
        return ledger.decide_complete(query, checkpoint_id, now)
    if kind == 8:
        return ledger.decide_release(query)
    return ledger.decide_allow_rewind(group)


def picture(ledger: Ledger, now: float) -> dict[str, Any]:
    """Everything observable about the ledger."""
    return {
        "queries": {q: repr(s) for q, s in ledger.queries.items()},
        "groups": {g: repr(s) for g, s in ledger.groups.items()},
        "unattributed": dict(ledger.unattributed),
        "ready": sorted(ledger.ready_groups(now)),
        "next": ledger.next_retry_at(),
    }


steps = st.lists(
    st.tuples(
        st.integers(0, 9),
        st.integers(0, 2),
        st.integers(0, 2),
        st.integers(0, 12),
        st.integers(0, 50),
    ),
    max_size=30,
)


def run(ledger: Ledger, history: list[tuple[int, int, int, int, int]], commits: list[bool]) -> None:
    """Apply ``history`` directly, taking and finishing commits along the way."""
    for i, step in enumerate(history):
        now = float(i)
        ledger.apply(event(ledger, step, now))
        for group_id in ledger.ready_groups(now):
            request = ledger.take(group_id, now)
            if request is not None and commits[i % len(commits)]:
                failure = None if commits[(i + 1) % len(commits)] else "timeout"
                ledger.apply_change(ledger.commit_result(request, now, failure))


@settings(max_examples=300, deadline=None)
@given(history=steps, batch=steps, commits=st.lists(st.booleans(), min_size=1, max_size=8))
def test_rolling_back_a_batch_restores_everything(
    history: list[tuple[int, int, int, int, int]],
    batch: list[tuple[int, int, int, int, int]],
    commits: list[bool],
) -> None:
    ledger = Ledger(max_pending=3, refresh_after=5.0)
    run(ledger, history, commits)
    now = float(len(history))
    before = picture(ledger, now + 100)
    savepoints = []
    for step in batch:
        decision = event(ledger, step, now)
        savepoints.append(ledger.savepoint(decision))
        ledger.apply(decision)
        held = {s.group_id for s in savepoints if s.group_id is not None}
        assert not held & set(ledger.ready_groups(now + 100)), "a held group is never ready"
        assert all(ledger.take(g, now + 100) is None for g in held)
    for savepoint in reversed(savepoints):
        ledger.rollback(savepoint)
    assert picture(ledger, now + 100) == before


@settings(max_examples=200, deadline=None)
@given(history=steps, batch=steps, commits=st.lists(st.booleans(), min_size=1, max_size=8))
def test_settling_a_batch_is_the_same_as_applying_it(
    history: list[tuple[int, int, int, int, int]],
    batch: list[tuple[int, int, int, int, int]],
    commits: list[bool],
) -> None:
    direct, saved = Ledger(max_pending=3), Ledger(max_pending=3)
    run(direct, history, commits)
    run(saved, history, commits)
    now = float(len(history))
    savepoints = []
    for step in batch:
        direct.apply(event(direct, step, now))
        decision = event(saved, step, now)
        savepoints.append(saved.savepoint(decision))
        saved.apply(decision)
    for savepoint in savepoints:
        saved.settle(savepoint)
    assert picture(saved, now + 100) == picture(direct, now + 100)


@settings(max_examples=200, deadline=None)
@given(history=steps, commits=st.lists(st.booleans(), min_size=1, max_size=8))
def test_the_refresh_index_agrees_with_a_scan(
    history: list[tuple[int, int, int, int, int]], commits: list[bool]
) -> None:
    ledger = Ledger(refresh_after=3.0)
    run(ledger, history, commits)
    for now in (0.0, 2.5, 10.0, 50.0):
        scanned = {
            g.group_id
            for g in ledger.groups.values()
            if (due := ledger._refresh_due(g)) is not None and due <= now
        }
        with_slot = {
            g.group_id
            for g in ledger.groups.values()
            if g.slot is not None and g.in_flight is None and g.retry_at <= now
        }
        assert set(ledger.ready_groups(now)) == scanned | with_slot


def test_the_refresh_index_stays_bounded() -> None:
    ledger = Ledger(refresh_after=1e6)
    for batch in range(5000):
        ledger.apply(
            ledger.decide_progress("q", "g", "r", batch, {TopicPartition("t", 0): batch}, batch)
        )
        request = ledger.take("g", float(batch))
        assert request is not None
        ledger.apply_change(ledger.commit_result(request, float(batch)))
    assert len(ledger._refresh_heap) <= 2 * len(ledger.groups) + 65
