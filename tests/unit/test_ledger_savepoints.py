"""R10: a decision applied under a savepoint and rolled back leaves the ledger exactly as
it was; while a savepoint is open its group is held (never taken); and the R9 refresh
index agrees with a full scan of the groups."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
from tests.support.fuzz import examples
from tests.support.ledger_histories import Step, commit_patterns, event, histories, run

steps = histories(max_size=30)


def picture(ledger: Ledger, now: float) -> dict[str, Any]:
    """Everything observable about the ledger."""
    return {
        "queries": {q: repr(s) for q, s in ledger.queries.items()},
        "groups": {g: repr(s) for g, s in ledger.groups.items()},
        "unattributed": dict(ledger.unattributed),
        "ready": sorted(ledger.ready_groups(now)),
        "next": ledger.next_retry_at(),
    }


@settings(max_examples=examples(300), deadline=None)
@given(history=steps, batch=steps, commits=commit_patterns)
def test_rolling_back_a_batch_restores_everything(
    history: list[Step],
    batch: list[Step],
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


@settings(max_examples=examples(200), deadline=None)
@given(history=steps, batch=steps, commits=commit_patterns)
def test_settling_a_batch_is_the_same_as_applying_it(
    history: list[Step],
    batch: list[Step],
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
        saved.keep(savepoint)
    assert picture(saved, now + 100) == picture(direct, now + 100)


@settings(max_examples=examples(200), deadline=None)
@given(history=steps, commits=commit_patterns)
def test_the_refresh_index_agrees_with_a_scan(history: list[Step], commits: list[bool]) -> None:
    ledger = Ledger(refresh_after=3.0)
    run(ledger, history, commits)
    for now in (0.0, 2.5, 10.0, 50.0):
        scanned = {
            g.group_id
            for g in ledger.groups.values()
            if (due := ledger._retries.refresh_due(g)) is not None and due <= now
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
    assert len(ledger._retries._refresh_heap) <= 2 * len(ledger.groups) + 65
