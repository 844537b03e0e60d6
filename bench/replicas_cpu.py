"""CPU per event with 1, 2 and 3 replicas on one PostgreSQL, side by side in one run
(issue 18: "replicas pay for themselves").

    .venv/bin/python -m bench replicas_cpu --rounds 2 --seconds 10

Each replica is a real ``offset-sidecar serve`` process with ``SIDECAR_REPLICATED=true``
on one real PostgreSQL (started here, ``fsync=on``), committing to the real broker.
Load: one ``wrk`` per replica (``bench/wrk/progress.lua``, ``-t1``, 32/N connections
each, closed loop), each sending its own queries: a listener's keep-alive connection
stays with one replica, as behind a Kubernetes Service. A group's owner is whichever
replica claimed it first, so with N replicas about (N-1)/N of the events reach a replica
that does not own their group: it records them, and the owner hears of it (``NOTIFY``)
and takes the change in. Rounds alternate 1, 2, 3 replicas so that all see the same
noise; each round starts from an empty database and is warmed up before it is measured.

CPU from /proc over the measured seconds: every replica, every PostgreSQL process (its
user's), every wrk (beside the figures: the load generator's own share), and the share
of the host's time that other tenants took (steal, from /proc/stat: it moves these
figures from one day to the next). CPU per event = (replicas + PostgreSQL) / accepted
events; the issue's target is three replicas' CPU per event <= 1.3 x one replicated
process's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pwd
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import create_topic
from bench.http_throughput import (
    WRK_SCRIPT,
    all_ticks,
    cpu_seconds,
    cpu_until_exit,
    main_thread_cpu,
    steal_ticks,
    wrk_summary,
)
from harness.postgres_server import PostgresServer
from harness.replica_cluster import ReplicaCluster


def postgres_cpu() -> float:
    """CPU seconds of every process of the ``postgres`` user (this bench's server only)."""
    uid, total = pwd.getpwnam("postgres").pw_uid, 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                if entry.stat().st_uid == uid:
                    total += cpu_seconds(int(entry.name))
    return total


def wrk_each(
    bases: list[str], *, seconds: float, topic: str, queries: int, partitions: int, run: str
) -> dict[str, Any]:
    """One closed-loop wrk per replica, at once, each with its own queries; the sums."""
    per = queries // len(bases)
    procs = []
    for index, base in enumerate(bases):
        env = {
            **os.environ, "TOPIC": topic, "QUERIES": str(per), "QUERY_BASE": str(index * per),
            "PARTITIONS": str(partitions), "RATE": "0", "RUN": run, "THREADS": "1",
        }  # fmt: skip
        command = [
            "wrk", "-t1", f"-c{32 // len(bases)}", f"-d{round(seconds)}s", "-s", str(WRK_SCRIPT),
            f"{base}/v1/progress",
        ]  # fmt: skip
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True))
    totals: dict[str, Any] = {"requests": 0, "accepted": 0, "errors": 0, "seconds": 0.0}
    totals["wrk_cpu_s"] = cpu_until_exit(procs)
    for p in procs:
        r = wrk_summary(p.communicate()[0])
        totals["requests"] += r["requests"]
        totals["accepted"] += r["accepted"]
        totals["errors"] += r["non2xx"] + r["socket_errors"]
        totals["seconds"] = max(totals["seconds"], r["seconds"])
    return totals


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
    """One round of ``size`` replicas; with ``profile``, py-spy samples every replica
    through the measured seconds into ``profile/r<i>.txt`` (collapsed stacks)."""
    server.reset()
    cluster = ReplicaCluster(folder, args.bootstrap, server.url, size, log_level="WARNING")
    cluster.start()
    try:
        bases = [r.url for r in cluster.replicas.values()]
        pids = [r.process.pid for r in cluster.replicas.values() if r.process is not None]
        run = uuid.uuid4().hex[:6]
        common = {"topic": args.topic, "queries": args.queries, "partitions": args.partitions}
        wrk_each(bases, seconds=3, run=run, **common)  # warm-up: queries known, groups owned
        idle_before = sum(cpu_seconds(p) for p in pids), postgres_cpu()
        time.sleep(args.idle_seconds)  # no load: what the replicas spend on their own
        idle = sum(cpu_seconds(p) for p in pids), postgres_cpu()
        spies = (
            []
            if profile is None
            else [
                subprocess.Popen(spy(pid, profile / f"r{i}.txt", args.seconds))
                for i, pid in enumerate(pids)
            ]
        )
        replicas_before, pg_before = sum(cpu_seconds(p) for p in pids), postgres_cpu()
        loops_before = sum(main_thread_cpu(p) for p in pids)
        batches_before = batches(bases)
        steal_before, ticks_before = steal_ticks(), all_ticks()
        result = wrk_each(bases, seconds=args.seconds, run=run, **common)
        steal, ticks = steal_ticks() - steal_before, all_ticks() - ticks_before
        result["steal_pct"] = 100 * steal / max(1, ticks)
        batches_after = batches(bases)
        for sampler in spies:
            sampler.wait()
        result["idle_cpu_per_s"] = (
            idle[0] - idle_before[0] + idle[1] - idle_before[1]
        ) / args.idle_seconds
        result["loops_cpu_s"] = sum(main_thread_cpu(p) for p in pids) - loops_before
        result["replicas_cpu_s"] = sum(cpu_seconds(p) for p in pids) - replicas_before
        result["postgres_cpu_s"] = postgres_cpu() - pg_before
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
    args = parser.parse_args()
    args.topic = f"bench-replicas-cpu-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(args.bootstrap, args.topic, args.partitions))
    server = PostgresServer().start()
    rows: list[str] = []
    per_event: dict[int, list[dict[str, Any]]] = {}
    try:
        for round_ in range(args.rounds):
            for size in (1, 2, 3):
                with tempfile.TemporaryDirectory() as folder:
                    r = measure(args, server, size, Path(folder))
                per_event.setdefault(size, []).append(r)
                rows.append(
                    f"| {size} | {round_} | {r['accepted']:,} | {r['events_per_s']:,.0f} | "
                    f"{r['errors']} | {r['replicas_cpu_s']:.1f} | {r['postgres_cpu_s']:.1f} | "
                    f"{r['replica_ms']:.2f} | {r['loop_ms']:.2f} | {r['threads_ms']:.2f} | "
                    f"{r['postgres_ms']:.2f} | {r['total_ms']:.2f} | "
                    f"{r['wrk_cpu_s']:.1f} | {r['batches_per_event']:.2f} | "
                    f"{r['items_per_batch']:.1f} | {100 * r['idle_cpu_per_s']:.0f} % | "
                    f"{r['steal_pct']:.1f} |"
                )
                print(rows[-1], flush=True)
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as folder:
                measure(args, server, args.profile_replicas, Path(folder), profile=args.profile)
            print(f"profiles of {args.profile_replicas} replicas in {args.profile}", flush=True)
    finally:
        server.stop()
    print()
    print(f"{os.cpu_count()} cores; {args.queries} queries x {args.partitions} partitions")
    print(
        "| replicas | round | events accepted | events/s | errors | replicas CPU s | "
        "PostgreSQL CPU s | replicas ms/event | of which event loops | of which threads | "
        "PostgreSQL ms/event | total ms/event | wrk CPU s | store batches/event | items/batch | "
        "CPU without load | steal % |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
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
        print(
            f"{n} replicas: median {medians[n]:.2f} ms CPU/event (replicas alone "
            f"{replica_only[n]:.2f}), ratio to 1 replica {medians[n] / medians[1]:.2f}"
        )


if __name__ == "__main__":
    main()
