"""A batch written in layers with executemany leaves the database exactly as the same
changes written one by one, in order (on SQLite, and on PostgreSQL for a fixed batch)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings

from spark_offset_sidecar.adapters.sql.store import SqlStore
from spark_offset_sidecar.core.ledger.changes import Change
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.ports.store import StoredState
from tests.support.fuzz import examples
from tests.support.ledger_histories import Step, commit_patterns, histories, run


def changes_of(history: list[Step], commits: list[bool]) -> list[Change]:
    """Every change a ledger makes for ``history``, commit results included, in order."""
    return run(Ledger(max_pending=3), history, commits)


def stored(url: str, changes: list[Change], one_by_one: bool) -> StoredState:
    store = SqlStore(url)
    store.migrate()
    if one_by_one:
        for change in changes:
            store.persist([change])
    else:
        store.persist(changes)
    state = store.load()
    store.close()
    return state


def same(a: StoredState, b: StoredState) -> bool:
    def key(state: StoredState) -> tuple[list[str], list[str]]:
        return (
            sorted(repr(q) for q in state.queries),
            sorted(repr(g) for g in state.groups),
        )

    return key(a) == key(b)


@settings(max_examples=examples(60), deadline=None)
@given(history=histories(max_size=40), commits=commit_patterns)
def test_a_batch_equals_its_changes_one_by_one(history: list[Step], commits: list[bool]) -> None:
    changes = changes_of(history, commits)
    with tempfile.TemporaryDirectory() as folder:
        batched = stored(f"sqlite:///{folder}/batched.db", changes, one_by_one=False)
        single = stored(f"sqlite:///{folder}/single.db", changes, one_by_one=True)
    assert same(batched, single)


def test_a_batch_on_each_database(database_url: str, tmp_path: Path) -> None:
    history = [(0, q, q, b, b * 3) for b in range(4) for q in range(3)]
    history += [
        (4, 0, 0, 9, 40),
        (6, 0, 0, 9, 0),
        (8, 1, 1, 0, 0),
        (0, 1, 0, 10, 50),
        (9, 0, 0, 0, 0),
    ]
    changes = changes_of(history, [True, False])
    batched = stored(database_url, changes, one_by_one=False)
    single = stored(f"sqlite:///{tmp_path}/single.db", changes, one_by_one=True)
    assert same(batched, single)
    assert len(batched.queries) >= 2
