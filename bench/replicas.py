"""Callback throughput with 1, 2 and 3 replicas on one PostgreSQL, and failover time, in
one run.

    .venv/bin/python -m bench replicas --rounds 2 --seconds 10

Each replica is a real ``offset-sidecar serve`` process with ``SIDECAR_REPLICATED=true``
on one real PostgreSQL (started here, ``fsync=on``), committing to the real broker. The
load is ``bench/loadgen`` (closed loop, as fast as answers come), its requests spread
round robin over the replicas as a Kubernetes Service would. Rounds alternate 1, 2, 3
replicas so that all see the same noise; a single process on SQLite runs beside them as
the baseline. Beside every row (``bench.figures``): the CPU of the service's processes,
of PostgreSQL, the broker, the load generator and this process.

Failover: three replicas take load; the one holding the most groups is killed with
SIGKILL while events keep coming to the two others; for each of its groups, the time
from the kill to the first commit by a survivor (from the replicas' JSON commit logs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar, build_loadgen, create_topic, load
from bench.figures import CpuMeter, Table, broker_pid, ratio
from harness.postgres_server import PostgresServer
from harness.replica_cluster import ReplicaCluster, overlapping_owners

COLUMNS = ("target", "mode", "events", "events/s", "p50 ms", "p99 ms")
SIDES = ("service", "postgres", "broker", "loadgen", "bench")


def cells(name: str, r: dict[str, Any]) -> tuple[object, ...]:
    return (name, r["mode"], r["sent"], round(r["events_per_second"]), r["p50_ms"], r["p99_ms"])


def measured_load(
    service: list[int], server: PostgresServer | None, url: str, *options: Any, **load_options: Any
) -> tuple[dict[str, Any], CpuMeter]:
    """``load`` under a ``CpuMeter`` of the service's processes, PostgreSQL and the broker."""
    postgres = None if server is None else server.pid()
    with CpuMeter(service=service, postgres=postgres, broker=broker_pid()) as meter:
        result = load(url, *options, **load_options)
    meter.add("loadgen", result["loadgen_cpu_s"])
    return result, meter


def throughput(args: argparse.Namespace, server: PostgresServer, table: Table) -> None:
    rates: dict[str, list[float]] = {}
    batch = 0
    for _ in range(args.rounds):
        for size in (0, 1, 2, 3):  # 0: the SQLite baseline
            batch += 1_000_000
            name = "sqlite, 1 process" if size == 0 else f"postgresql, {size} replicas"
            with tempfile.TemporaryDirectory() as folder:
                if size == 0:
                    single = Sidecar(args.bootstrap)
                    urls, pids, stop = [single.url], [single.process.pid], single.stop
                    database = None
                else:
                    server.reset()
                    cluster = ReplicaCluster(
                        Path(folder), args.bootstrap, server.url, size, log_level="WARNING"
                    ).start()
                    urls, stop = [r.url for r in cluster.replicas.values()], cluster.stop
                    pids = [r.process.pid for r in cluster.replicas.values() if r.process]
                    database = server
                try:
                    result, meter = measured_load(
                        pids, database, ",".join(urls), args, batch, seconds=args.seconds,
                        topic=args.topic,
                    )  # fmt: skip
                finally:
                    stop()
            rates.setdefault(name, []).append(result["events_per_second"])
            table.add(*cells(name, result), meter=meter)
    table.print()
    base = statistics.median(rates["postgresql, 1 replicas"])
    for name, values in rates.items():
        ratio(f"median events/s, {name} / 1 replica", statistics.median(values), base)


def failover(args: argparse.Namespace, server: PostgresServer, table: Table) -> list[str]:
    server.reset()
    with tempfile.TemporaryDirectory() as folder:
        cluster = ReplicaCluster(
            Path(folder),
            args.bootstrap,
            server.url,
            3,
            lease_seconds=args.lease,
            commit_timeout_seconds=args.lease / 3,
        ).start()
        try:
            urls = {name: r.url for name, r in cluster.replicas.items()}
            pids = {name: r.process.pid for name, r in cluster.replicas.items() if r.process}
            warm, meter = measured_load(
                list(pids.values()), server, ",".join(urls.values()), args, 50_000_000,
                seconds=5, rate=200, topic=args.topic,
            )  # fmt: skip
            table.add(*cells("warm-up, 3 replicas", warm), meter=meter)
            owners = {c.group_id: c.replica for c in cluster.commits()}
            victim = max(urls, key=lambda n: sum(1 for r in owners.values() if r == n))
            victim_groups = {g for g, r in owners.items() if r == victim}
            survivors = ",".join(u for n, u in urls.items() if n != victim)
            background: dict[str, Any] = {}
            alive = [pid for name, pid in pids.items() if name != victim]
            loader = threading.Thread(
                target=lambda: background.update(
                    zip(
                        ("result", "meter"),
                        measured_load(
                            alive, server, survivors, args, 60_000_000,
                            seconds=3 * args.lease + 10, rate=200, topic=args.topic,
                        ),
                        strict=True,
                    )
                )
            )  # fmt: skip
            loader.start()
            time.sleep(2)
            killed_at = time.time()
            cluster.replicas[victim].kill()
            loader.join()
            moved: dict[str, float] = {}
            for commit in cluster.commits():
                taken_over = commit.replica != victim and commit.started_at > killed_at
                if commit.group_id in victim_groups and taken_over:
                    moved.setdefault(commit.group_id, commit.ended_at - killed_at)
            clashes = overlapping_owners(cluster.commits())
        finally:
            cluster.stop()
    times = sorted(moved.values())
    table.add(
        *cells("during failover, 2 survivors", background["result"]), meter=background["meter"]
    )
    table.print()
    return [
        f"killed {victim} holding {len(victim_groups)} groups; moved {len(moved)} of them; "
        f"lease {args.lease:g} s",
        f"failover (kill -> first commit by a survivor): min {times[0]:.2f} s, median "
        f"{statistics.median(times):.2f} s, max {times[-1]:.2f} s"
        if times
        else "failover: no group moved",
        f"commits of one group by two replicas at once: {len(clashes)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--lease", type=float, default=6.0)
    args = parser.parse_args()
    args.topic = f"bench-replicas-{uuid.uuid4().hex[:8]}"  # commits need a real topic
    asyncio.run(create_topic(args.bootstrap, args.topic, args.partitions))
    build_loadgen()
    server = PostgresServer().start()
    shape = f"{os.cpu_count()} cores; {args.queries} queries x {args.partitions} partitions"
    try:
        throughput(args, server, Table(f"Throughput, {shape}", *COLUMNS, cpu=SIDES))
        tail = failover(args, server, Table(f"Failover, {shape}", *COLUMNS, cpu=SIDES))
    finally:
        server.stop()
    print("\n".join(tail))


if __name__ == "__main__":
    main()
