"""A replica's lease renewal at fleet size, and what a batch of events writing one of its
groups waits meanwhile: an earlier commit's ``LeaseStore`` (``--before REV``, its
``adapters/sql/lease_store.py`` read from git) against this checkout's, alternating, on
one real PostgreSQL.

``--groups`` groups owned by one replica, each row as wide as a group of ``--partitions``
partitions makes it (its slot's and committed offsets' JSON); ``--renewals`` renewals a
round, 0.3 s apart, while a writer updates one group at a time (a random one, one
transaction each, back to back with 2 ms between): the renewal's time, and the writes'
p50, p99 and largest time. A renewal holding every group's row in one transaction makes a
write that meets it wait until it ends. Each side's CPU beside its figures (PostgreSQL's
backends, this process). Each side has a database of its own, made by this checkout's
migrations; ``--before-fillfactor`` sets the before side's ``consumer_groups`` pages to
another fill (100: as before migration 0007), and the table's size after each round shows
what the renewals left behind. The sides alternate.

    .venv/bin/python -m bench lease_renewal --groups 10000 --before 0c50c51
    .venv/bin/python -m bench lease_renewal --groups 10000 --before-fillfactor 100
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import Engine, create_engine, insert, text

from bench.bench_support import module_at
from bench.figures import CpuMeter, Table, median_ratios
from harness.postgres_server import PostgresServer
from spark_offset_sidecar.adapters.sql import lease_store, migrate
from spark_offset_sidecar.adapters.sql.schema import consumer_groups

MODULE = "service/spark_offset_sidecar/adapters/sql/lease_store.py"
WRITE = text("UPDATE consumer_groups SET committed_at = committed_at + 1 WHERE group_id = :g")
TABLE_MB = text("SELECT pg_total_relation_size('consumer_groups') / 1048576.0")


def group_id(index: int) -> str:
    return f"bench-group-{index:012d}"


def fill(engine: Engine, groups: int, partitions: int) -> None:
    offsets = json.dumps({"bench-7": {str(p): 123_456 + p for p in range(partitions)}})
    rows = [
        {
            "group_id": group_id(i), "rewind_allowed": False, "slot_offsets": offsets,
            "committed_offsets": offsets, "committed_at": 1.0, "committed_query_id": f"q{i}",
            "committed_checkpoint_id": 5, "owner_id": "r0", "owner_epoch": 1,
            "owner_expires_at": 0.0,
        }
        for i in range(groups)
    ]  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(consumer_groups), rows)


def side_database(server: PostgresServer, name: str, fillfactor: int | None) -> Engine:
    """A database of its own, at this checkout's schema (pages at ``fillfactor`` if given)."""
    with create_engine(server.url, isolation_level="AUTOCOMMIT").connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    engine = create_engine(f"{server.url.rsplit('/', 1)[0]}/{name}", pool_size=4)
    migrate.upgrade(engine)
    if fillfactor is not None:
        with engine.begin() as conn:
            conn.execute(text(f"ALTER TABLE consumer_groups SET (fillfactor = {fillfactor})"))
    return engine


def one_side(engine: Engine, module: ModuleType, args: argparse.Namespace) -> dict[str, Any]:
    """``--renewals`` renewals while a writer writes; their figures."""
    leases = module.LeaseStore(engine, "r0", 30.0)
    stop, waits = threading.Event(), []

    def writer() -> None:
        with engine.connect() as conn:
            while not stop.is_set():
                started = time.perf_counter()
                with conn.begin():
                    conn.execute(WRITE, {"g": group_id(random.randrange(args.groups))})
                waits.append(time.perf_counter() - started)
                time.sleep(0.002)

    thread = threading.Thread(target=writer)
    thread.start()
    renewals, held = [], 0
    try:
        for _ in range(args.renewals):
            started = time.perf_counter()
            held = len(leases.renew().held)
            renewals.append(time.perf_counter() - started)
            time.sleep(0.3)
    finally:
        stop.set()
        thread.join()
    # The writer holds one row at a time: each renewal transaction may skip the one it meets.
    transactions = -(-args.groups // getattr(module, "RENEWED_A_TRANSACTION", args.groups))
    if held < args.groups - transactions:
        raise SystemExit(f"a renewal held {held} of {args.groups} groups")
    waits.sort()
    return {
        "renewal_ms": 1000 * statistics.median(renewals),
        "p50_ms": 1000 * waits[len(waits) // 2],
        "p99_ms": 1000 * waits[int(len(waits) * 0.99)],
        "max_ms": 1000 * waits[-1],
        "writes": len(waits),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=32, help="a group row's width")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--renewals", type=int, default=8, help="renewals a round and side")
    parser.add_argument("--before", default="HEAD", help="the commit to compare with")
    parser.add_argument(
        "--before-fillfactor", type=int, help="the before side's consumer_groups page fill, %%"
    )
    args = parser.parse_args()
    table = Table(
        f"A lease renewal of {args.groups:,} groups ({args.partitions} partitions' offsets a "
        f"row) while one group at a time is written, {args.renewals} renewals a round",
        "side", "round", "renewal median ms", "write p50 ms", "write p99 ms", "write max ms",
        "writes", "table MB", cpu=("postgres", "bench"),
    )  # fmt: skip
    figures: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    before = args.before + ("" if args.before_fillfactor is None else
                            f", pages {args.before_fillfactor} % full")  # fmt: skip
    server = PostgresServer().start()
    try:
        engines = {
            "before": side_database(server, "before_side", args.before_fillfactor),
            "after": side_database(server, "after_side", None),
        }
        for engine in engines.values():
            fill(engine, args.groups, args.partitions)
        with tempfile.TemporaryDirectory(prefix="lease-renewal-") as folder:
            earlier = module_at(args.before, MODULE, Path(folder))
            modules = {"before": earlier, "after": lease_store}
            for round_ in range(1, args.rounds + 1):
                for name, engine in engines.items():
                    with CpuMeter(postgres=server.pid()) as meter:
                        found = one_side(engine, modules[name], args)
                    with engine.connect() as conn:
                        size = float(conn.scalar(TABLE_MB) or 0)
                    figures[name].append(found)
                    table.add(
                        f"before ({before})" if name == "before" else name, round_,
                        f"{found['renewal_ms']:.1f}", f"{found['p50_ms']:.2f}",
                        f"{found['p99_ms']:.1f}", f"{found['max_ms']:.1f}", found["writes"],
                        f"{size:.0f}", meter=meter,
                    )  # fmt: skip
        for engine in engines.values():
            engine.dispose()
    finally:
        server.stop()
    table.print()
    median_ratios(
        args.rounds,
        figures,
        (
            ("max_ms", "a write's longest wait"),
            ("p99_ms", "a write's p99"),
            ("renewal_ms", "a renewal's time"),
        ),
    )


if __name__ == "__main__":
    main()
