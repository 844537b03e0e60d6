"""Watchers in pods of their own paired with replicas on a real PostgreSQL
(``adapters.sql.watcher_pairs``; the replica's side: ``lease_store``'s renewal)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import text, update

from spark_offset_sidecar.adapters.sql.lease_store import LeaseStore
from spark_offset_sidecar.adapters.sql.schema import replicas
from spark_offset_sidecar.adapters.sql.watcher_pairs import SqlWatcherPairing


def _watcher(engine: Any, name: str) -> SqlWatcherPairing:
    return SqlWatcherPairing(engine, name, f"http://{name}:8001", 30)


def _expire(engine: Any, **columns: float) -> None:
    """Every replica's row with these columns set (0: long past, by the database's clock)."""
    with engine.begin() as conn:
        conn.execute(update(replicas).values(**columns))


def test_each_live_replica_pairs_with_one_watcher_and_tells_it_at_its_url(stores: Any) -> None:
    a, b = stores
    leases_a, leases_b = LeaseStore(a.engine, "a", 30), LeaseStore(b.engine, "b", 30)
    assert leases_a.renew().watcher is None  # no watcher yet
    leases_b.renew()
    w1, w2, w3 = (_watcher(a.engine, n) for n in ("w1", "w2", "w3"))
    assert w1.pair() == "a"  # the oldest replica first
    assert w2.pair() == "b"
    assert w3.pair() is None  # a spare: every live replica has a watcher
    assert (w1.pair(), w2.pair(), w3.pair()) == ("a", "b", None)  # renewed, kept
    assert leases_a.renew().watcher == "http://w1:8001"
    assert leases_b.renew().watcher == "http://w2:8001"
    w1.leave()  # a clean stop: the replica's next renewal finds none, the spare takes it
    assert leases_a.renew().watcher is None
    assert w3.pair() == "a"
    assert leases_a.renew().watcher == "http://w3:8001"
    assert w1.pair() is None


def test_a_lapsed_claim_or_a_dead_replica_pairs_anew(stores: Any) -> None:
    a, b = stores
    leases_a, leases_b = LeaseStore(a.engine, "a", 30), LeaseStore(b.engine, "b", 30)
    leases_a.renew()
    leases_b.renew()
    w1, w2 = _watcher(a.engine, "w1"), _watcher(a.engine, "w2")
    assert (w1.pair(), w2.pair()) == ("a", "b")
    with a.engine.begin() as conn:  # w1 could not renew within its lease
        conn.execute(text("UPDATE replicas SET watcher_expires_at = 0 WHERE replica_id = 'a'"))
    assert leases_a.renew().watcher is None  # a lapsed claim is no watcher
    w3 = _watcher(a.engine, "w3")
    assert w3.pair() == "a"
    assert w1.pair() is None  # its claim was taken meanwhile: it is a spare now
    _expire(a.engine, expires_at=0)  # both replicas died (their rows not yet removed)
    assert (w1.pair(), w2.pair(), w3.pair()) == (None, None, None)
    leases_b.renew()  # b lives again (its lease renewed): the first to ask pairs with it
    assert w1.pair() == "b"
    assert (w2.pair(), w3.pair()) == (None, None)
    assert leases_b.renew().watcher == "http://w1:8001"


def test_watchers_racing_for_replicas_each_get_one_or_none(stores: Any) -> None:
    """Eight watchers pair at once with two replicas, ten times over: each replica paired
    with exactly one, no watcher with two."""
    a, b = stores
    leases = [LeaseStore(a.engine, "a", 30), LeaseStore(b.engine, "b", 30)]
    for each in leases:
        each.renew()
    for round_ in range(10):
        watchers = [_watcher(a.engine, f"w{round_}-{i}") for i in range(8)]
        with ThreadPoolExecutor(8) as pool:
            paired = list(pool.map(lambda w: w.pair(), watchers))
        assert sorted(p for p in paired if p is not None) == ["a", "b"], paired
        urls = {each.replica_id: each.renew().watcher for each in leases}
        assert urls == {
            r: f"http://{watchers[paired.index(r)].watcher_id}:8001" for r in ("a", "b")
        }
        for watcher in watchers:
            watcher.leave()
