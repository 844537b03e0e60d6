"""Leases and the fence on a real PostgreSQL (adapters.sql.lease_store and shared_store)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import select, text

from spark_offset_sidecar.adapters.sql import lease_store
from spark_offset_sidecar.adapters.sql.lease_store import LeaseStore
from spark_offset_sidecar.adapters.sql.schema import consumer_groups
from spark_offset_sidecar.adapters.sql.shared_store import SharedSqlStore, lock_key
from spark_offset_sidecar.core.ledger.changes import (
    Checkpoint,
    CheckpointAdded,
    CommitRequest,
    CommitSucceeded,
    QueryRegistered,
)
from spark_offset_sidecar.core.offsets import TopicPartition
from tests.support.lease_clock import LeaseClock
from tests.support.service import wait_for

TP = TopicPartition("t", 0)


def _success(group: str, fence: int, checkpoint: int = 1) -> CommitSucceeded:
    request = CommitRequest(
        Checkpoint(f"q{group[1:]}", group, checkpoint, None, {TP: checkpoint}, 0.0),
        {TP: checkpoint},
        attempt=1,
        fence=fence,
    )
    return CommitSucceeded(request, 1.0, {TP: checkpoint})


def _committed(store: SharedSqlStore, group: str) -> Any:
    with store.engine.connect() as conn:
        return conn.scalar(
            select(consumer_groups.c.committed_checkpoint_id).where(
                consumer_groups.c.group_id == group
            )
        )


def test_two_replicas_claim_disjoint_groups(stores: Any) -> None:
    a, b = stores
    leases_a, leases_b = LeaseStore(a.engine, "a", 30), LeaseStore(b.engine, "b", 30)
    assert leases_a.renew().held == {}
    leases_b.renew()
    assert leases_a.renew().replicas == 2
    mine, theirs = leases_a.claim(2), leases_b.claim(10)
    assert set(mine) == {"g0", "g1"}
    assert set(theirs) == {"g2", "g3"}
    assert set(mine.values()) == set(theirs.values()) == {1}
    assert leases_a.renew().held == mine


def test_an_expired_owner_loses_its_groups_and_its_late_success_is_fenced(
    stores: Any, lease_clock: LeaseClock
) -> None:
    a, b = stores
    fenced: list[int] = []
    a.on_fenced = fenced.append
    leases_a = LeaseStore(a.engine, "a", 10, now=lease_clock.sql)
    leases_b = LeaseStore(b.engine, "b", 30, now=lease_clock.sql)
    epoch_a = leases_a.claim(1)["g0"]
    lease_clock.advance(9.9)
    assert leases_b.claim(10).keys() == {"g1", "g2", "g3"}  # g0's lease still holds
    lease_clock.advance(0.2)
    assert leases_b.claim(10) == {"g0": epoch_a + 1}
    assert leases_a.renew().held == {}  # a renewal does not take it back

    a.begin(set(), set())
    a.persist([_success("g0", epoch_a, checkpoint=7)])  # a's commit ended after its lease
    assert _committed(a, "g0") is None
    assert fenced == [1]
    b.begin(set(), set())
    b.persist([_success("g0", epoch_a + 1, checkpoint=8)])
    assert _committed(b, "g0") == 8


def test_leaving_frees_every_group_for_the_others_at_once(stores: Any) -> None:
    a, b = stores
    leases_a, leases_b = LeaseStore(a.engine, "a", 30), LeaseStore(b.engine, "b", 30)
    leases_a.claim(10)
    assert leases_b.claim(10) == {}
    leases_a.leave()
    assert set(leases_b.claim(10)) == {"g0", "g1", "g2", "g3"}
    assert leases_b.renew().replicas == 1


def test_leaving_frees_a_group_whose_row_a_batch_was_writing_once_the_batch_ends(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load, a batch of another replica holds a group's row as this one leaves: the
    release skips it (SKIP LOCKED) and tries again, so that the group does not wait a
    whole lease for its next owner."""
    a, b = stores
    leases_a, leases_b = LeaseStore(a.engine, "a", 30), LeaseStore(b.engine, "b", 30)
    leases_a.claim(10)
    releases: list[Any] = []
    release = leases_a._release

    def counted(conn: Any, which: Any) -> None:
        releases.append(which)
        release(conn, which)

    monkeypatch.setattr(leases_a, "_release", counted)
    with ThreadPoolExecutor(1) as pool, b.engine.connect() as batch, batch.begin():
        batch.execute(  # as a batch writing g0 holds its row
            select(consumer_groups.c.group_id)
            .where(consumer_groups.c.group_id == "g0")
            .with_for_update(key_share=True)
        )
        leaving = pool.submit(leases_a.leave)
        wait_for(lambda: len(releases) >= 2, 10, "the release to try again")
        assert not leaving.done()
        batch.commit()
        leaving.result(timeout=lease_store.LEAVE_SECONDS + 5)
    assert set(leases_b.claim(10)) == {"g0", "g1", "g2", "g3"}


def test_a_renewal_holds_a_few_groups_rows_at_a_time_and_renews_them_all(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch writing a group waits while a renewal holds the group's row: a renewal of
    thousands of groups in one transaction held them all for its whole time (~150 ms at
    10,000), every round. As each few groups' transaction begins, those renewed before are
    written and free: a batch can lock them at once (NOWAIT)."""
    a, _ = stores
    monkeypatch.setattr(lease_store, "RENEWED_A_TRANSACTION", 2)
    leases = LeaseStore(a.engine, "a", 30)
    claimed = leases.claim(10)
    with a.engine.begin() as conn:  # near its end: a renewal shows by its new expiry
        conn.execute(text("UPDATE consumer_groups SET owner_expires_at = 0"))
    seen: list[tuple[str, ...]] = []
    renew_some = leases._renew_some

    def watched(conn: Any, group_ids: list[str]) -> dict[str, int]:
        before = tuple(g for ids in seen for g in ids)
        with a.engine.connect() as other, other.begin():
            expiries = other.execute(
                select(consumer_groups.c.owner_expires_at)
                .where(consumer_groups.c.group_id.in_(before))
                .with_for_update(nowait=True, key_share=True)  # held: "could not obtain lock"
            ).scalars()
            assert all(e is not None and e > time.time() + 20 for e in expiries)
        seen.append(tuple(group_ids))
        return renew_some(conn, group_ids)

    monkeypatch.setattr(leases, "_renew_some", watched)
    assert leases.renew().held == claimed
    assert sorted(len(ids) for ids in seen) == [2, 2]
    assert {g for ids in seen for g in ids} == {"g0", "g1", "g2", "g3"}


def _lock_is_free(store: SharedSqlStore, kind: str, name: str) -> bool:
    with store.engine.connect() as conn:  # a session lock, gone when the connection closes
        taken = conn.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_key(kind, name)})
    return bool(taken)


def test_a_batch_locks_what_it_touches_and_loads_it_with_its_partners(stores: Any) -> None:
    a, b = stores
    loaded = a.begin({"q1"}, {"g2"})
    assert loaded.query_ids == {"q1", "q2"}
    assert loaded.group_ids == {"g1", "g2"}
    assert {q.query_id for q in loaded.stored.queries} == {"q1", "q2"}
    assert not _lock_is_free(b, "g", "g1")
    assert not _lock_is_free(b, "q", "q2")
    assert _lock_is_free(b, "g", "g3")
    a.persist([])
    assert _lock_is_free(b, "g", "g1")


def test_a_batch_tells_the_cpu_of_each_of_its_steps(postgres_server: Any) -> None:
    postgres_server.reset()
    told: list[tuple[str, float]] = []
    store = SharedSqlStore(
        postgres_server.url, "a", on_step=lambda step, seconds: told.append((step, seconds))
    )
    store.migrate()
    try:
        store.begin({"q0"}, set())
        store.persist([QueryRegistered("q0", "g0", 0.0)])
    finally:
        store.close()
    assert [step for step, _ in told] == [
        "reach", "lock", "load", "fence", "write", "notify", "commit"
    ]  # fmt: skip
    assert all(seconds >= 0 for _, seconds in told)


def test_a_batch_loads_the_pending_checkpoints_of_its_own_queries_only(stores: Any) -> None:
    """Another query's pending checkpoint (a followed folder's ``offsets/N`` waiting for
    its ``commits/N``) is neither loaded nor in the way of a batch."""
    a, b = stores
    b.persist([
        CheckpointAdded(Checkpoint("q0", "g0", 7, "run", {TopicPartition("t", 0): 5}, 1.0)),
        CheckpointAdded(Checkpoint("q1", "g1", 3, "run", {TopicPartition("t", 0): 2}, 1.0)),
    ])  # fmt: skip
    loaded = a.begin({"q1"}, {"g1"})
    a.persist([])
    assert {q.query_id: list(q.pending) for q in loaded.stored.queries} == {"q1": [3]}


def test_a_report_being_written_blocks_neither_a_fence_check_nor_a_renewal(
    stores: Any,
) -> None:
    """A status report's insert checks its foreign key with a KEY SHARE lock on the group's
    row until it commits; the fence check (and a renewal) must not wait for it: with
    ``FOR UPDATE`` they did, and a publication of several groups in the other order
    deadlocked with a batch (seen at 2 replicas under load: 503s "deadlock detected")."""
    a, _ = stores
    leases = LeaseStore(a.engine, "a", 30)
    leases.renew()
    epoch = leases.claim(1)["g0"]
    with a.engine.connect() as reporting, ThreadPoolExecutor(1) as pool:
        reporting.begin()
        reporting.execute(  # what SqlStatusBoard.publish's insert does to g0's row
            text("SELECT 1 FROM consumer_groups WHERE group_id = 'g0' FOR KEY SHARE")
        )
        batch = pool.submit(_fence_and_renew, a, leases, epoch)
        try:
            done = batch.result(timeout=10)  # waiting for the report's lock: TimeoutError
        finally:
            reporting.rollback()
    assert done == ({"g0": epoch}, 3)


def _fence_and_renew(store: SharedSqlStore, leases: LeaseStore, epoch: int) -> Any:
    store.begin(set(), set())
    store.persist([_success("g0", epoch, checkpoint=3)])
    return leases.renew().held, _committed(store, "g0")
