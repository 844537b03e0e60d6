"""StoreFollower on a real store: a ledger that takes no events follows, through its own
connections, what another ledger writes, reading again only the rows that changed.
Runs on a SQLite file and on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.core.ledger.changes import Decision
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.runtime.store_follower import StoreFollower

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Taker:
    """The process that takes events: decides, writes, then applies (as DurableLedger)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.ledger = Ledger()
        self.now = 0.0

    def record(self, decision: Decision) -> None:
        self.store.persist(decision.changes)
        self.ledger.apply(decision)

    def progress(self, query: str, group: str, batch: int, offset: int) -> None:
        self.now += 1
        self.record(self.ledger.decide_progress(query, group, "r", batch, {T0: offset}, self.now))

    def commit(self, group: str) -> None:
        self.now += 1
        request = self.ledger.take(group, self.now)
        assert request is not None
        result = self.ledger.commit_result(request, self.now)
        self.store.persist((result,))
        self.ledger.apply_change(result)


@pytest.fixture
def stores(database_url: str) -> Iterator[tuple[SqlStore, SqlStore]]:
    """The taker's store and the watcher's: two engines on one database."""
    taker, watcher = SqlStore(database_url), SqlStore(database_url)
    taker.migrate()
    yield taker, watcher
    taker.close()
    watcher.close()


def held(ledger: Ledger) -> dict[str, Any]:
    """What a ledger holds of the store's state, comparable."""
    return {
        "queries": {
            q.query_id: (q.group_id, q.last_completed_id, q.last_run_id, sorted(q.pending))
            for q in ledger.queries.values()
        },
        "groups": {
            g.group_id: (
                g.query_id,
                g.slot and (g.slot.query_id, g.slot.checkpoint_id, dict(g.slot.offsets)),
                g.committed and (g.committed.checkpoint_id, dict(g.committed.offsets)),
                g.rewind_allowed,
                g.commit_interval,
                g.cluster,
            )
            for g in ledger.groups.values()
        },
    }


def stored(store: SqlStore) -> dict[str, Any]:
    loaded = store.load()
    return held(Ledger(queries=loaded.queries, groups=loaded.groups))


def step(follower: StoreFollower) -> None:
    asyncio.run(follower.step())


def test_the_follower_holds_what_the_store_holds_through_every_kind_of_change(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    taker_store, watcher_store = stores
    taker = Taker(taker_store)
    follower = StoreFollower(watcher_store, Ledger(), interval=1.0)
    step(follower)
    assert held(follower.ledger) == stored(taker_store) == {"queries": {}, "groups": {}}

    for i in range(5):
        taker.progress(f"q{i}", f"g{i}", 1, 10)
    step(follower)
    assert held(follower.ledger) == stored(taker_store)
    assert follower.ledger.groups["g0"].slot is not None

    taker.commit("g0")  # a commit: the slot goes, committed offsets arrive
    taker.progress("q1", "g1", 2, 20)  # a newer completion replaces the slot
    taker.record(taker.ledger.decide_snapshot("q2", "g2", 5, "r", {T0: 50}, 9.0))  # pending
    taker.commit("g3")
    step(follower)
    taker.record(taker.ledger.decide_release("q3"))  # the query goes; its group's row stays
    taker.record(taker.ledger.decide_allow_rewind("g4"))
    taker.record(taker.ledger.decide_commit_interval("g4", 30.0))
    step(follower)
    assert held(follower.ledger) == stored(taker_store)
    assert follower.ledger.groups["g0"].committed is not None
    assert "q3" not in follower.ledger.queries
    assert follower.ledger.groups["g3"].query_id is None
    assert list(follower.ledger.queries["q2"].pending) == [5]

    taker.progress("q9", "g3", 1, 7)  # another query takes the freed group
    taker.record(taker.ledger.decide_snapshot("q2", "g2", 6, "r", {T0: 60}, 10.0))
    taker.record(taker.ledger.decide_complete("q2", 6, 11.0))  # pending rows go
    step(follower)
    assert held(follower.ledger) == stored(taker_store)
    assert follower.ledger.groups["g3"].query_id == "q9"
    assert follower.ledger.queries["q2"].pending == {}


def test_a_step_reads_again_only_what_changed(stores: tuple[SqlStore, SqlStore]) -> None:
    taker_store, watcher_store = stores
    taker = Taker(taker_store)
    for i in range(50):
        taker.progress(f"q{i}", f"g{i}", 1, 10)
    follower = StoreFollower(watcher_store, Ledger(), interval=1.0)
    step(follower)
    assert follower.reread == 100  # the first step: every query and group

    step(follower)
    assert follower.reread == 100  # nothing changed: no row read again

    taker.commit("g7")
    taker.progress("q8", "g8", 2, 20)
    step(follower)
    assert follower.reread == 104  # two groups and their two queries
    assert held(follower.ledger) == stored(taker_store)


def test_a_follower_of_some_groups_holds_those_and_lets_the_others_go(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    """A replica's watcher (``wanted``: the groups its replica holds the leases of): memory
    holds those groups and their queries only, reads no other row, takes a group when it
    becomes wanted and lets it go when it no longer is."""
    taker_store, watcher_store = stores
    taker = Taker(taker_store)
    for i in range(6):
        taker.progress(f"q{i}", f"g{i}", 1, 10)
    wanted: set[str] = set()
    follower = StoreFollower(
        watcher_store, Ledger(), interval=1.0, wanted=lambda: frozenset(wanted)
    )
    step(follower)
    assert held(follower.ledger) == {"queries": {}, "groups": {}}
    assert follower.reread == 0

    def held_of(group_ids: set[str]) -> dict[str, Any]:
        everything = stored(taker_store)
        return {
            "queries": {q: v for q, v in everything["queries"].items() if v[0] in group_ids},
            "groups": {g: v for g, v in everything["groups"].items() if g in group_ids},
        }

    wanted.update({"g1", "g2"})
    step(follower)
    assert held(follower.ledger) == held_of({"g1", "g2"})
    assert follower.reread == 4  # two groups and their two queries, no other row

    taker.commit("g1")
    taker.progress("q4", "g4", 2, 20)  # not wanted: not read
    step(follower)
    assert held(follower.ledger) == held_of({"g1", "g2"})
    assert follower.reread == 6

    wanted.symmetric_difference_update({"g2", "g4"})  # g2's lease lost, g4's taken
    step(follower)
    assert held(follower.ledger) == held_of({"g1", "g4"})
    assert follower.reread == 10  # g4 and q4 read, g2 and q2 let go (as gone rows are)
    taker.progress("q9", "g4", 1, 7)  # another query takes a wanted group
    step(follower)
    assert held(follower.ledger) == held_of({"g1", "g4"})
