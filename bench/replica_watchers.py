"""What each replica's watcher holds: several replicas on one PostgreSQL, every group
committed, an earlier commit and this checkout side by side in one run (issue 47).

    .venv/bin/python -m bench replica_watchers --groups 3000 --partitions 32 --before HEAD~1

For each side (``--before REV``: that commit's ``service/`` from a ``git worktree``;
``after``: this checkout), from an empty database: ``--replicas`` replicas
(``offset-sidecar serve`` with ``SIDECAR_REPLICATED=true``, each watching in its child, the
default) on a PostgreSQL started here, committing to the broker. The load generator sends
one event for each of ``--groups`` queries (one group each), round robin over the
replicas (a failed event is counted, and its group is then left out: one event a group).
Once every group is committed, the leases are shared out (each replica holds
its fair share, ``sidecar_groups_owned``) and every group is evaluated by its owner's
child (its status series on one replica's ``/metrics``), the resident memory of every
replica and of its child is read; then every child is SIGKILLed, its replica starts it
again, and once the new children have evaluated every group again their memory is read
too (``fresh``: what a child started with these leases holds, free of what an earlier
share of the groups left in its heap). Beside each row, the CPU of the replicas (their
children with them) and of PostgreSQL from the load (or the kill) to that reading.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import create_topic, load, worktree
from bench.figures import CpuMeter, Table, ratio, rss_kib
from harness.postgres_server import PostgresServer
from harness.processes import children
from harness.replica_cluster import ReplicaCluster

TOPIC = "bench"  # the load generator's


def _figures(cluster: ReplicaCluster) -> dict[str, Any]:
    """Every replica's /metrics: groups owned and groups evaluated, summed."""
    owned, evaluated = [], 0
    for replica in cluster.replicas.values():
        text = httpx.get(f"{replica.url}/metrics", timeout=60).text
        found = re.search(r"^sidecar_groups_owned (\S+)", text, re.M)
        owned.append(int(float(found.group(1))) if found else 0)
        evaluated += len(re.findall(r"^sidecar_consumergroup_status\{", text, re.M))
    return {"owned": owned, "evaluated": evaluated}


def _settled(cluster: ReplicaCluster, groups: int, deadline: float) -> dict[str, Any]:
    """Until every group is owned, each replica holds its fair share, and every group is
    evaluated by exactly one replica's child."""
    share = groups // len(cluster.replicas)
    figures: dict[str, Any] = {}
    while time.monotonic() < deadline:
        figures = _figures(cluster)
        owned = figures["owned"]
        if sum(owned) == groups and min(owned) >= share and figures["evaluated"] == groups:
            return figures
        time.sleep(2)
    raise SystemExit(f"the leases and evaluations did not settle: {figures}")


def _watchers(cluster: ReplicaCluster) -> dict[str, int]:
    """Each replica's child watcher's pid."""
    found = {}
    for name, replica in cluster.replicas.items():
        assert replica.process is not None
        (child,) = children(replica.process.pid)
        found[name] = child
    return found


def _memory(cluster: ReplicaCluster) -> tuple[list[float], list[float]]:
    """Resident MiB of every replica, and of every replica's child."""
    replicas = [rss_kib(r.process.pid) / 1024 for r in cluster.replicas.values() if r.process]
    watchers = [rss_kib(pid) / 1024 for pid in _watchers(cluster).values()]
    return replicas, watchers


def side(
    name: str, source: Path | None, args: argparse.Namespace, postgres: PostgresServer, table: Table
) -> float:
    """One side's rows; returns its fresh children's resident MiB, summed."""
    postgres.reset()
    with tempfile.TemporaryDirectory(prefix="replica-watchers-") as folder:
        cluster = ReplicaCluster(
            Path(folder), args.bootstrap, postgres.url, args.replicas,
            log_level="WARNING", lag_read_interval_seconds=args.read_interval,
        )  # fmt: skip
        if source is not None:  # ahead of the virtualenv's editable install of this one
            for replica in cluster.replicas.values():
                replica.env["PYTHONPATH"] = str(source / "service")
        cluster.start()
        pids = [r.process.pid for r in cluster.replicas.values() if r.process is not None]
        try:
            urls = ",".join(r.url for r in cluster.replicas.values())
            loaded = argparse.Namespace(queries=args.groups, partitions=args.partitions, workers=16)
            with CpuMeter(replicas=pids, postgres=postgres.pid()) as meter:
                sent = load(urls, loaded, 0, allow_errors=True, **{"per-query": 1, "seconds": 600})
                failed = sent["errors"] + sent["non_2xx"]
                groups = args.groups - failed  # one event a group: a failed one, no group
                owned = _settled(cluster, groups, time.monotonic() + args.settle_seconds)
            replicas, watchers = _memory(cluster)
            cells = (failed, *owned["owned"], *replicas, *watchers, sum(watchers))
            table.add(name, "settled", *cells, meter=meter)
            with CpuMeter(replicas=pids, postgres=postgres.pid()) as meter:
                for pid in _watchers(cluster).values():
                    os.kill(pid, signal.SIGKILL)
                time.sleep(5)  # each replica starts its child again after 1 s
                owned = _settled(cluster, groups, time.monotonic() + args.settle_seconds)
            replicas, watchers = _memory(cluster)
            cells = ("", *owned["owned"], *replicas, *watchers, sum(watchers))
            table.add(name, "fresh", *cells, meter=meter)
            return sum(watchers)
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--before", help="a commit to compare with (git worktree)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--groups", type=int, default=3000)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--read-interval", type=float, default=5.0, help="lag reads, seconds")
    parser.add_argument("--settle-seconds", type=float, default=600.0)
    args = parser.parse_args()

    asyncio.run(create_topic(args.bootstrap, TOPIC, args.partitions))
    names = [f"r{i}" for i in range(args.replicas)]
    table = Table(
        f"{args.replicas} replicas on PostgreSQL, {args.groups:,} groups x {args.partitions} "
        "partitions, each replica's watcher its child",
        "side", "when", "events failed", *(f"{n} owns" for n in names),
        *(f"{n} MiB" for n in names), *(f"{n}'s child MiB" for n in names), "children MiB",
        cpu=("replicas", "postgres"),
    )  # fmt: skip
    postgres = PostgresServer().start()
    fresh: dict[str, float] = {}
    try:
        if args.before:
            with (
                tempfile.TemporaryDirectory(prefix="replica-watchers-") as folder,
                worktree(args.before, folder) as tree,
            ):
                fresh["before"] = side(f"before ({args.before})", tree, args, postgres, table)
        fresh["after"] = side("after", None, args, postgres, table)
    finally:
        postgres.stop()
    table.print()
    if "before" in fresh:
        ratio("children's resident MiB, fresh, after / before", fresh["after"], fresh["before"])


if __name__ == "__main__":
    main()
