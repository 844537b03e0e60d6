"""SqlStore: what was persisted is what a new ledger starts from; failures are clean.
Runs on a SQLite file and on a real PostgreSQL server."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.core.clusters import ClusterOf
from spark_offset_sidecar.core.ledger.changes import Decision, QueryRegistered
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.errors import StoreError, StoreUnavailable

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def record(ledger: Ledger, store: SqlStore, decision: Decision) -> None:
    store.persist(decision.changes)
    ledger.apply(decision)


def reload(store: SqlStore) -> Ledger:
    stored = store.load()
    return Ledger(queries=stored.queries, groups=stored.groups)


def test_round_trip_of_every_kind_of_state(store: SqlStore) -> None:
    ledger = Ledger()
    record(ledger, store, ledger.decide_progress("q1", "g1", "r", 3, {T0: 30, T1: 31}, 1.0))
    request = ledger.take("g1", 2.0)
    assert request is not None
    change = ledger.commit_result(request, 3.0)
    store.persist((change,))
    ledger.apply_change(change)
    record(ledger, store, ledger.decide_progress("q1", "g1", "r", 4, {T0: 40, T1: 2**62}, 4.0))
    for cp in (6, 5, 7):
        record(ledger, store, ledger.decide_snapshot("q1", "g1", cp, "r", {T0: cp * 10}, 5.0))
    record(ledger, store, ledger.decide_progress("q2", "g2", None, 0, {T0: 1}, 6.0))
    record(ledger, store, ledger.decide_allow_rewind("g2"))

    again = reload(store)
    q1 = again.queries["q1"]
    assert (q1.group_id, q1.last_completed_id, q1.last_run_id) == ("g1", 4, "r")
    assert list(q1.pending) == [5, 6, 7]
    assert q1.pending[6].offsets == {T0: 60}
    g1 = again.groups["g1"]
    assert g1.query_id == "q1"
    assert g1.committed is not None
    assert (g1.committed.checkpoint_id, g1.committed.offsets) == (3, {T0: 30, T1: 31})
    assert g1.slot is not None
    assert (g1.slot.checkpoint_id, g1.slot.offsets) == (4, {T0: 40, T1: 2**62})
    assert set(again.ready_groups(now=10.0)) == {"g1", "g2"}
    assert again.groups["g2"].rewind_allowed


def test_success_keeps_a_newer_slot_entry(store: SqlStore) -> None:
    ledger = Ledger()
    record(ledger, store, ledger.decide_progress("q", "g", "r", 1, {T0: 10}, 1.0))
    request = ledger.take("g", 1.0)
    assert request is not None
    record(ledger, store, ledger.decide_progress("q", "g", "r", 2, {T0: 20}, 2.0))
    store.persist((ledger.commit_result(request, 3.0),))
    group = reload(store).groups["g"]
    assert group.committed is not None
    assert group.committed.checkpoint_id == 1
    assert group.slot is not None
    assert group.slot.checkpoint_id == 2


def test_release_removes_query_and_pending_and_frees_the_group(store: SqlStore) -> None:
    ledger = Ledger()
    record(ledger, store, ledger.decide_snapshot("q", "g", 1, "r", {T0: 10}, 1.0))
    record(ledger, store, ledger.decide_progress("q", "g", "r", 2, {T0: 20}, 1.0))
    record(ledger, store, ledger.decide_snapshot("q", "g", 3, "r", {T0: 30}, 1.0))
    record(ledger, store, ledger.decide_release("q"))
    again = reload(store)
    assert again.queries == {}
    assert again.groups["g"].query_id is None
    assert again.groups["g"].slot is None
    record(again, store, again.decide_progress("q-new", "g", "r", 0, {T0: 31}, 2.0))
    assert reload(store).groups["g"].query_id == "q-new"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only files")
def test_read_only_database_is_unavailable_and_nothing_half_written(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    ledger = Ledger()
    record(ledger, store, ledger.decide_progress("q", "g", "r", 1, {T0: 10}, 1.0))
    store.close()
    for path in tmp_path.iterdir():
        path.chmod(stat.S_IRUSR)
    read_only = SqlStore(store.url)
    decision = ledger.decide_progress("q", "g", "r", 2, {T0: 20}, 2.0)
    with pytest.raises(StoreUnavailable):
        read_only.persist(decision.changes)


def test_a_read_only_connection_refuses_writes_cleanly(tmp_path: Path) -> None:
    """Works as root too: SQLite's own read-only mode."""
    path = tmp_path / "db.sqlite"
    writer = SqlStore(f"sqlite:///{path}")
    writer.migrate()
    ledger = Ledger()
    record(ledger, writer, ledger.decide_progress("q", "g", "r", 1, {T0: 10}, 1.0))
    writer.close()
    read_only = SqlStore(f"sqlite:///file:{path}?mode=ro&uri=true")
    decision = ledger.decide_progress("q", "g", "r", 2, {T0: 20}, 2.0)
    with pytest.raises(StoreUnavailable, match="readonly"):
        read_only.persist(decision.changes)
    group = reload(writer).groups["g"]
    assert group.slot is not None
    assert group.slot.checkpoint_id == 1, "the failed write left no trace"


def test_committed_offsets_keep_partitions_the_newest_checkpoint_does_not_name(
    store: SqlStore,
) -> None:
    ledger = Ledger()
    for batch, offsets in ((1, {T0: 10, T1: 11}), (2, {T0: 20})):
        record(ledger, store, ledger.decide_progress("q", "g", "r", batch, offsets, 1.0))
        request = ledger.take("g", 1.0)
        assert request is not None
        change = ledger.commit_result(request, 2.0)
        store.persist((change,))
        ledger.apply_change(change)
    committed = reload(store).groups["g"].committed
    assert committed is not None
    assert (committed.checkpoint_id, committed.offsets) == (2, {T0: 20, T1: 11})


def test_a_write_the_database_refuses_is_a_store_error_and_leaves_no_trace(
    store: SqlStore,
) -> None:
    """A query registered twice breaks the primary key: on either database the batch is
    refused by name, rolled back whole (its other changes are not kept either)."""
    ledger = Ledger()
    record(ledger, store, ledger.decide_progress("q", "g", "r", 1, {T0: 10}, 1.0))
    again = QueryRegistered("q", "g2", 2.0)
    other = ledger.decide_progress("q2", "g3", "r", 1, {T0: 5}, 2.0)
    with pytest.raises(StoreError, match=r"refused writing: .*(UNIQUE|unique|duplicate)"):
        store.persist([*other.changes, again])
    stored = reload(store)
    assert set(stored.queries) == {"q"}
    assert set(stored.groups) == {"g"}


def test_a_groups_own_commit_interval_is_kept_and_can_return_to_the_default(
    store: SqlStore,
) -> None:
    ledger = Ledger()
    record(ledger, store, ledger.decide_progress("q1", "g1", "r", 1, {T0: 1}, 1.0))
    record(ledger, store, ledger.decide_progress("q2", "g2", "r", 1, {T0: 1}, 1.0))
    record(ledger, store, ledger.decide_commit_interval("g1", 2.5))
    record(ledger, store, ledger.decide_commit_interval("g2", 0.0))
    again = reload(store)
    assert (again.groups["g1"].commit_interval, again.groups["g2"].commit_interval) == (2.5, 0.0)
    record(ledger, store, ledger.decide_commit_interval("g1", None))
    assert reload(store).groups["g1"].commit_interval is None


def test_a_groups_kafka_cluster_is_kept_and_a_new_query_on_it_keeps_it(store: SqlStore) -> None:
    ledger = Ledger()
    eu = ClusterOf("eu", named=True)
    record(ledger, store, ledger.decide_progress("q1", "g1", "r", 1, {T0: 1}, 1.0, eu))
    record(ledger, store, ledger.decide_progress("q2", "g2", "r", 1, {T0: 1}, 1.0))
    again = reload(store)
    assert (again.groups["g1"].cluster, again.groups["g2"].cluster) == ("eu", None)
    record(ledger, store, ledger.decide_release("q1"))
    record(ledger, store, ledger.decide_progress("q3", "g1", "r", 1, {T0: 2}, 2.0))
    assert reload(store).groups["g1"].cluster == "eu"
