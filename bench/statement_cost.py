"""The CPU one SQL statement of a store batch costs in this process, three ways side by
side in one run (issue 18: where a replicated batch's fixed cost goes): as the store runs
it (its writes as their driver's SQL text through ``Connection.exec_driver_sql``, the
rest through SQLAlchemy Core), through SQLAlchemy Core, and through the driver alone (the
same SQL text, compiled once by SQLAlchemy).

    .venv/bin/python bench/statement_cost.py [--calls 2000] [--repeats 5]

PostgreSQL (started here, ``fsync=on``; the replicas' store) and SQLite (a file in WAL
mode with ``synchronous=FULL``; the default store) with the service's own schema from its
migrations: 300 queries and their groups, a checkpoint pending for each query. The
statements are the store's own objects (``adapters.sql.shared_store`` and
``adapters.sql.writes``) with a batch's parameters: 9 queries and their 9 groups (the
batch size of three replicas under load, bench/README.md). The calls of one repeat run in
one transaction, rolled back at its end (a batch is one transaction of many statements;
the advisory locks are re-entrant, and the writes set the same values each time), the
same for every way. Two rows are floors, not the store's statements: ``SELECT 1``, and a
whole transaction of it (BEGIN, ``SELECT 1``, COMMIT: the least any batch costs), whose
user and system CPU are also printed apart.

CPU is this thread's ``time.thread_time`` (waiting for the server is not counted): the
median over ``--repeats`` of the mean over ``--calls`` calls, the ways alternating
within each repeat so that all see the same noise.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import Connection, insert, text

from harness.postgres_server import PostgresServer
from spark_offset_sidecar.adapters.sql import shared_store, writes
from spark_offset_sidecar.adapters.sql.schema import consumer_groups, pending_checkpoints, queries
from spark_offset_sidecar.adapters.sql.store import SqlStore

QUERIES = 300
BATCH = [10 * i for i in range(9)]  # the batch's query (and group) numbers
OFFSETS = '{"orders":{"0":100,"1":200,"2":300,"3":400,"4":500,"5":600,"6":700,"7":800}}'


def seed(store: SqlStore) -> None:
    store.migrate()
    with store.engine.begin() as conn:
        conn.execute(
            insert(consumer_groups),
            [{"group_id": f"g{i}", "rewind_allowed": False} for i in range(QUERIES)],
        )
        conn.execute(
            insert(queries),
            [
                {"query_id": f"q{i}", "group_id": f"g{i}", "registered_at": 1.0}
                for i in range(QUERIES)
            ],
        )
        conn.execute(
            insert(pending_checkpoints),
            [
                {"query_id": f"q{i}", "checkpoint_id": 7, "offsets": OFFSETS, "created_at": 1.0}
                for i in range(QUERIES)
            ],
        )


def slot_rows() -> list[dict[str, Any]]:
    return [
        {
            "b_group": f"g{i}",
            "b_query": f"q{i}",
            "b_id": 8,
            "b_run": "run-1",
            "b_offsets": OFFSETS,
            "b_at": 2.0,
        }
        for i in BATCH
    ]


def statements(dialect: str) -> list[tuple[str, Any, Any]]:
    """(name, statement, parameters: a dict, or a list for executemany)."""
    qids, gids = [f"q{i}" for i in BATCH], [f"g{i}" for i in BATCH]
    found: list[tuple[str, Any, Any]] = [("floor: SELECT 1", text("SELECT 1"), {})]
    if dialect == "postgresql":
        keys = sorted(shared_store.lock_key("q", q) for q in qids)
        found += [
            ("reach: partners", shared_store._PARTNERS, {"q": qids, "g": gids}),
            ("lock: 18 advisory locks", shared_store._LOCK_KEYS, {"keys": keys}),
            ("load: queries", shared_store._QUERIES, {"q": qids, "g": gids}),
            ("load: pending", shared_store._PENDING, {"q": qids}),
            ("load: groups", shared_store._GROUPS, {"g": gids}),
            ("notify", text("SELECT pg_notify('bench', :p)"), {"p": "x" * 200}),
        ]
    rows = slot_rows()
    found += [
        ("write: slots (executemany 9)", writes._SET_SLOT, rows),
        (
            "write: completed (executemany 9)",
            writes._SET_COMPLETED,
            [{k: r[k] for k in ("b_query", "b_id", "b_run")} for r in rows],
        ),
    ]
    return found


Way = tuple[Callable[[], None], Callable[[], None]]  # (one call, end the transaction)


def by_store(conn: Connection, statement: Any, params: Any) -> Way:
    """As the store runs it: a write (``writes._Write``) as its driver's SQL text through
    ``exec_driver_sql``, anything else through SQLAlchemy Core."""
    if not isinstance(statement, writes._Write):
        return by_sqlalchemy(conn, statement, params)

    def call() -> None:
        statement.run(conn, params)

    return call, conn.rollback


def core_of(statement: Any) -> Any:
    return statement.statement if isinstance(statement, writes._Write) else statement


def by_sqlalchemy(conn: Connection, statement: Any, params: Any) -> Way:
    statement = core_of(statement)

    def call() -> None:
        result = conn.execute(statement, params)
        if result.returns_rows:
            result.mappings().all()

    return call, conn.rollback


def by_driver(conn: Connection, statement: Any, params: Any) -> Way:
    """The same SQL text on the driver's own cursor (rows as dicts, as the store reads
    them by column name)."""
    compiled = core_of(statement).compile(dialect=conn.dialect)
    sql = str(compiled)
    raw = conn.connection.driver_connection
    assert raw is not None
    positional = compiled.positiontup  # SQLite's "?" parameters: their names in order
    if positional and isinstance(params, list):
        params = [tuple(p[name] for name in positional) for p in params]
    elif positional:
        params = tuple(params[name] for name in positional)

    def call() -> None:
        cursor = raw.cursor()
        try:
            if isinstance(params, list):
                cursor.executemany(sql, params)
            else:
                cursor.execute(sql, params)
                if cursor.description is not None:
                    names = [d[0] for d in cursor.description]
                    [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            cursor.close()

    return call, raw.rollback


def transaction_ways(conn: Connection) -> tuple[Way, Way, Way]:
    """A whole transaction of one ``SELECT 1``: BEGIN, the statement and COMMIT (three
    round trips with psycopg), the floor of any batch; every way ends committed."""
    conn.rollback()
    raw = conn.connection.driver_connection
    assert raw is not None
    select_1 = text("SELECT 1")

    def by_core() -> None:
        conn.execute(select_1).all()
        conn.commit()

    def by_raw() -> None:
        cursor = raw.cursor()
        try:
            cursor.execute("SELECT 1")
            cursor.fetchall()
        finally:
            cursor.close()
        raw.commit()

    return (by_core, lambda: None), (by_core, lambda: None), (by_raw, lambda: None)


def cpu_per_call(way: Way, calls: int) -> float:
    call, end = way
    started = time.thread_time()
    for _ in range(calls):
        call()
    spent = time.thread_time() - started
    end()
    return spent / calls


Row = tuple[str, float, float, float]  # name; CPU a call: the store's way, Core, driver


def compare(url: str, calls: int, repeats: int) -> list[Row]:
    store = SqlStore(url)
    seed(store)
    results: list[Row] = []
    try:
        with store.engine.connect() as conn:
            for name, statement, params in statements(conn.dialect.name):
                ways = tuple(
                    way(conn, statement, params) for way in (by_store, by_sqlalchemy, by_driver)
                )
                store_way, core, driver = side_by_side(ways, calls, repeats)
                results.append((name, store_way, core, driver))
            store_way, core, driver = side_by_side(transaction_ways(conn), calls, repeats)
            results.append(("transaction: BEGIN, SELECT 1, COMMIT", store_way, core, driver))
    finally:
        store.close()
    return results


def side_by_side(ways: tuple[Way, ...], calls: int, repeats: int) -> tuple[float, ...]:
    """Each way's median CPU per call, the ways alternating within each repeat."""
    for way in ways:  # warm: compiled caches, prepared statements
        cpu_per_call(way, 100)
    samples: list[list[float]] = [[] for _ in ways]
    for _ in range(repeats):
        for index, way in enumerate(ways):
            samples[index].append(cpu_per_call(way, calls))
    return tuple(statistics.median(of_way) for of_way in samples)


FLOORS = ("floor:", "transaction:")  # rows that are not the store's own statements


def kernel_share(url: str, calls: int) -> str:
    """Of the driver's empty transaction (BEGIN, ``SELECT 1``, COMMIT): the user and the
    system CPU and the context switches of this thread, per transaction."""
    store = SqlStore(url)
    try:
        with store.engine.connect() as conn:
            *_, (by_raw, _) = transaction_ways(conn)
            for _ in range(100):
                by_raw()
            before = resource.getrusage(resource.RUSAGE_THREAD)
            for _ in range(calls):
                by_raw()
            after = resource.getrusage(resource.RUSAGE_THREAD)
    finally:
        store.close()
    user = (after.ru_utime - before.ru_utime) / calls * 1e6
    system = (after.ru_stime - before.ru_stime) / calls * 1e6
    switches = (after.ru_nvcsw - before.ru_nvcsw) / calls
    return (
        f"driver's empty transaction: {user:.0f} us user + {system:.0f} us system CPU, "
        f"{switches:.1f} waits (voluntary context switches) a transaction"
    )


def table(database: str, rows: Sequence[Row]) -> str:
    lines = [
        f"| {database} statement | as the store runs it us/call | SQLAlchemy Core us/call "
        "| driver alone us/call | Core / driver |",
        "|---|---|---|---|---|",
    ]
    store_rows = [r for r in rows if not r[0].startswith(FLOORS)]
    total: Row = (
        f"the store's {len(store_rows)} statements",
        sum(r[1] for r in store_rows),
        sum(r[2] for r in store_rows),
        sum(r[3] for r in store_rows),
    )
    for name, store, core, driver in [*rows, total]:
        lines.append(
            f"| {name} | {store * 1e6:.0f} | {core * 1e6:.0f} | {driver * 1e6:.0f} "
            f"| {core / driver:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    server = PostgresServer().start()
    try:
        print(table("PostgreSQL", compare(server.url, args.calls, args.repeats)))
        print(kernel_share(server.url, args.calls))
    finally:
        server.stop()
    with tempfile.TemporaryDirectory() as folder:
        print()
        print(table("SQLite", compare(f"sqlite:///{folder}/bench.db", args.calls, args.repeats)))


if __name__ == "__main__":
    main()
