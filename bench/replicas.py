"""CPU and events/s with 1, 2 and 3 replicas on one PostgreSQL, side by side in one run,
and failover time.

    .venv/bin/python -m bench replicas --rounds 2 --seconds 10

Each replica is a real ``offset-sidecar serve`` process with ``SIDECAR_REPLICATED=true``
on one real PostgreSQL (started here, ``fsync=on``), committing to the real broker.
Load: one ``wrk`` per replica (``bench/wrk/progress.lua``, ``-t1``, 32/N connections
each, closed loop), each sending its own queries: a listener's keep-alive connection
stays with one replica, as behind a Kubernetes Service. A group's owner is whichever
replica claimed it first, so with N replicas about (N-1)/N of the events reach a replica
that does not own their group: it records them, and the owner hears of it (``NOTIFY``)
and takes the change in. Rounds alternate 1, 2, 3 replicas so that all see the same
noise; each round starts from an empty database and is warmed up before it is measured.

CPU from /proc over the measured seconds (``bench.figures``): every replica, every
PostgreSQL process (the postmaster's), every wrk (the load generator's own share), the
broker and this process, and the share of the host's time that other tenants took
(steal, from /proc/stat: it moves these figures from one day to the next). CPU per
event = (replicas + PostgreSQL) / accepted events. A replica's CPU counts its watcher
child's.

Failover: three replicas take load (``bench/loadgen`` at 200 events/s, round robin over
them); the one holding the most groups is killed with SIGKILL while events keep coming
to the two others; for each of its groups, the time from the kill to the first commit
by a survivor (from the replicas' JSON commit logs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import build_loadgen, create_topic, load, wrk
from bench.figures import CpuMeter, Table, broker_pid, main_thread_cpu, ratio
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


STEPS = ("reach", "lock", "load", "fence", "write", "notify", "commit")


def batches(bases: list[str]) -> tuple[float, float, dict[str, float]]:
    """The replicas' store batches so far: how many, the items (events, commit results,
    refreshes) they held (``sidecar_store_batch_items``), and the store threads' CPU
    seconds in each step of a batch (``sidecar_store_step_cpu_seconds``)."""
    count = items = 0.0
    steps = dict.fromkeys(STEPS, 0.0)
    for base in bases:
        for line in httpx.get(f"{base}/metrics").text.splitlines():
            if line.startswith("sidecar_store_batch_items_count"):
                count += float(line.split()[-1])
            elif line.startswith("sidecar_store_batch_items_sum"):
                items += float(line.split()[-1])
            elif line.startswith("sidecar_store_step_cpu_seconds_total{"):
                step = line.split('step="', 1)[1].split('"', 1)[0]
                steps[step] = steps.get(step, 0.0) + float(line.split()[-1])
    return count, items, steps


def spy(pid: int, out: Path, seconds: float) -> list[str]:
    """py-spy sampling ``pid`` 50 times a second without stopping it, collapsed stacks."""
    return [
        "py-spy", "record", "--nonblocking", "--rate", "50", "--format", "raw",
        "--duration", str(round(seconds)), "--pid", str(pid), "--output", str(out),
    ]  # fmt: skip


def measure(
    args: argparse.Namespace,
    server: PostgresServer,
    size: int,
    folder: Path,
    profile: Path | None = None,
) -> Any:
    """One round of ``size`` replicas; with ``profile``, py-spy
    samples every replica through the measured seconds into ``profile/r<i>.txt``
    (collapsed stacks)."""
    server.reset()
    cluster = ReplicaCluster(folder, args.bootstrap, server.url, size, log_level="WARNING")
    cluster.start()
    try:
        bases = [r.url for r in cluster.replicas.values()]
        pids = [r.process.pid for r in cluster.replicas.values() if r.process is not None]
        run = uuid.uuid4().hex[:6]
        common = {"topic": args.topic, "queries": args.queries, "partitions": args.partitions}
        wrk(bases, seconds=3, run=run, **common)  # warm-up: queries known, groups owned
        sides = {"replicas": pids, "postgres": server.pid(), "broker": broker_pid()}
        with CpuMeter(**sides) as idle:
            time.sleep(args.idle_seconds)  # no load: what the replicas spend on their own
        spies = (
            []
            if profile is None
            else [
                subprocess.Popen(spy(pid, profile / f"r{i}.txt", args.seconds))
                for i, pid in enumerate(pids)
            ]
        )
        loops_before = sum(main_thread_cpu(p) for p in pids)
        batches_before = batches(bases)
        with CpuMeter(**sides) as meter:
            result = wrk(bases, seconds=args.seconds, run=run, **common)
        meter.add("wrk", result["wrk_cpu_s"])
        batches_after = batches(bases)
        for sampler in spies:
            sampler.wait()
        result["idle_cpu_per_s"] = (
            (idle.seconds("replicas") or 0.0) + (idle.seconds("postgres") or 0.0)
        ) / args.idle_seconds
        result["loops_cpu_s"] = sum(main_thread_cpu(p) for p in pids) - loops_before
        result["replicas_cpu_s"] = meter.seconds("replicas") or 0.0
        result["postgres_cpu_s"] = meter.seconds("postgres") or 0.0
        result["meter"] = meter
    finally:
        cluster.stop()
    events = max(1, result["accepted"])
    made = batches_after[0] - batches_before[0]
    result["items_per_batch"] = (batches_after[1] - batches_before[1]) / max(1, made)
    result["batches_per_event"] = made / events
    result["step_ms_per_batch"] = {
        step: 1000 * (batches_after[2][step] - batches_before[2].get(step, 0.0)) / max(1, made)
        for step in batches_after[2]
    }
    result["events_per_s"] = result["requests"] / result["seconds"]
    result["replica_ms"] = 1000 * result["replicas_cpu_s"] / events
    result["postgres_ms"] = 1000 * result["postgres_cpu_s"] / events
    result["loop_ms"] = 1000 * result["loops_cpu_s"] / events
    result["threads_ms"] = result["replica_ms"] - result["loop_ms"]
    result["total_ms"] = result["replica_ms"] + result["postgres_ms"]
    return result


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


def summary(per_event: dict[int, list[dict[str, Any]]]) -> None:
    """The store threads' steps and the ratios to one replica, medians of the rounds."""
    print("The store threads' CPU in each step of a batch, ms per batch (medians of the rounds):")
    print("| replicas | " + " | ".join(STEPS) + " | all steps | items/batch |")
    print("|---|" + "---|" * (len(STEPS) + 2))
    for n, rs in sorted(per_event.items()):
        step_ms = {
            s: statistics.median(r["step_ms_per_batch"].get(s, 0.0) for r in rs) for s in STEPS
        }
        items = statistics.median(r["items_per_batch"] for r in rs)
        print(
            f"| {n} | "
            + " | ".join(f"{step_ms[s]:.2f}" for s in STEPS)
            + f" | {sum(step_ms.values()):.2f} | {items:.1f} |"
        )
    medians = {n: statistics.median(r["total_ms"] for r in rs) for n, rs in per_event.items()}
    replica_only = {
        n: statistics.median(r["replica_ms"] for r in rs) for n, rs in per_event.items()
    }
    print()
    for n in sorted(medians):
        ratio(f"median CPU ms/event, {n} replicas / 1 replica", medians[n], medians[1])
        ratio(f"  replicas alone, {n} / 1", replica_only[n], replica_only[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--profile",
        type=Path,
        help="after the rounds, one more round with py-spy (on PATH) sampling each replica "
        "into this folder (not counted in the figures: py-spy takes CPU too)",
    )
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=5,
        help="after the warm-up, seconds without load whose CPU (replicas + PostgreSQL) is "
        "the replicas' own background work (leases, status, notices)",
    )
    parser.add_argument(
        "--profile-replicas", type=int, default=3, help="how many replicas the profiled round has"
    )
    parser.add_argument("--workers", type=int, default=32, help="failover: loadgen's workers")
    parser.add_argument("--lease", type=float, default=6.0, help="failover: the lease, seconds")
    args = parser.parse_args()
    args.topic = f"bench-replicas-{uuid.uuid4().hex[:8]}"  # commits need a real topic
    asyncio.run(create_topic(args.bootstrap, args.topic, args.partitions))
    build_loadgen()
    server = PostgresServer().start()
    shape = f"{os.cpu_count()} cores; {args.queries} queries x {args.partitions} partitions"
    table = Table(
        f"CPU per event, {shape}",
        "replicas", "round", "events accepted", "events/s", "errors",
        "replicas ms/event", "of which event loops", "of which threads", "PostgreSQL ms/event",
        "total ms/event", "store batches/event", "items/batch", "CPU without load",
        cpu=("replicas", "postgres", "broker", "wrk", "bench"),
    )  # fmt: skip
    per_event: dict[int, list[dict[str, Any]]] = {}
    try:
        for round_ in range(args.rounds):
            for size in (1, 2, 3):
                with tempfile.TemporaryDirectory() as folder:
                    r = measure(args, server, size, Path(folder))
                per_event.setdefault(size, []).append(r)
                table.add(
                    size, round_, r["accepted"], round(r["events_per_s"]), r["errors"],
                    r["replica_ms"], r["loop_ms"], r["threads_ms"], r["postgres_ms"],
                    r["total_ms"], r["batches_per_event"], f"{r['items_per_batch']:.1f}",
                    f"{100 * r['idle_cpu_per_s']:.0f} %", meter=r["meter"],
                )  # fmt: skip
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as folder:
                measure(args, server, args.profile_replicas, Path(folder), profile=args.profile)
            print(f"profiles of {args.profile_replicas} replicas in {args.profile}", flush=True)
        table.print()
        summary(per_event)
        tail = failover(args, server, Table(f"Failover, {shape}", *COLUMNS, cpu=SIDES))
    finally:
        server.stop()
    print("\n".join(tail))


if __name__ == "__main__":
    main()
