"""The durable hot path against a bare FastAPI endpoint, side by side in one run, with a
light load generator (issue 18).

    .venv/bin/python -m bench http_throughput --rounds 2 --seconds 10 [--interval 1]

Load: ``wrk`` (C, one process; ``bench/wrk/progress.lua`` builds Spark-shaped progress
bodies: ``--queries`` queries x ``--partitions`` partitions, every request a new batch of
its query, each query's batches sent in order by one wrk thread). Closed loop with
``-t2 -c32`` in alternating rounds (bare, service, bare, ...), then ``--rate`` events/s
on a fixed schedule (16 connections, each request waiting for its slot) for the latency
at a set load.

The bare endpoint (``bench/bare_endpoint.py --json-only``) is FastAPI on uvicorn that
only ``json.loads`` the body and answers a small JSON. The service runs as shipped:
SQLite with ``synchronous=FULL`` (every 2xx on disk), committing to the real broker.

Every row has beside it (``bench.figures``) the CPU seconds of the server process, of the
broker (the bare endpoint does not use it, the service commits to it), of wrk and of this
process, and the server's CPU per event (and of its main thread, the event loop, alone).
At the end, Kafka is read back for a sample of groups: what the service said it accepted
is what is committed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Bare, Sidecar, create_topic, wrk
from bench.figures import CpuMeter, Table, broker_pid, main_thread_cpu, ratio

# The columns of a wrk run against a server, and its CPU sides.
COLUMNS = ("target", "load", "events", "events/s", "p50 ms", "p99 ms", "errors",
           "server CPU ms/event", "of which main thread")  # fmt: skip
SIDES = ("server", "broker", "wrk", "bench")


def run_wrk(url: str, pid: int, **options: Any) -> tuple[dict[str, Any], CpuMeter]:
    """``bench_support.wrk`` against the server ``pid`` at ``url``, under a ``CpuMeter`` of
    the server, the broker, wrk and this process; CPU per event of the server and of its
    main thread."""
    loop_before = main_thread_cpu(pid)
    with CpuMeter(server=pid, broker=broker_pid()) as meter:
        result = wrk([url], **options)
    loop_cpu = main_thread_cpu(pid) - loop_before
    meter.add("wrk", result["wrk_cpu_s"])
    requests = max(1, result["requests"])
    result["cpu_ms_per_event"] = 1000 * (meter.seconds("server") or 0.0) / requests
    result["loop_ms_per_event"] = 1000 * loop_cpu / requests
    return result, meter


def cells(target: str, load: str, r: dict[str, Any]) -> tuple[object, ...]:
    """A wrk run's figures, as ``COLUMNS`` lists them."""
    per_event = f"{r['cpu_ms_per_event']:.3f}", f"{r['loop_ms_per_event']:.3f}"
    return (target, load, r["requests"], round(r["events_per_s"]), r["p50_ms"], r["p99_ms"],
            r["errors"], *per_event)  # fmt: skip


async def committed_of(bootstrap: str, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        found = {}
        for group in groups:
            offsets = await admin.list_consumer_group_offsets(group)
            found[group] = {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}
        return found
    finally:
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument(
        "--interval",
        type=float,
        default=0.0,
        help="the service's SIDECAR_MIN_COMMIT_INTERVAL_SECONDS (0: every checkpoint)",
    )
    args = parser.parse_args()

    topic = f"bench-http-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(args.bootstrap, topic, args.partitions))
    bare = Bare(json_only=True)
    sidecar = Sidecar(args.bootstrap, min_commit_interval_seconds=args.interval)
    targets = {"bare": (bare.url, bare.process.pid), "service": (sidecar.url, sidecar.process.pid)}
    table = Table(
        f"{args.queries} queries x {args.partitions} partitions, {args.seconds:g} s a run, "
        f"commit interval {args.interval:g} s",
        *COLUMNS,
        cpu=SIDES,
    )
    closed: dict[str, list[dict[str, Any]]] = {"bare": [], "service": []}
    runs: dict[str, int] = {}
    try:
        for round_ in range(args.rounds):
            for name, (url, pid) in targets.items():
                run = f"{name[0]}{round_}-{uuid.uuid4().hex[:4]}"
                result, meter = run_wrk(
                    url, pid, seconds=args.seconds, topic=topic, queries=args.queries,
                    partitions=args.partitions, run=run,
                )  # fmt: skip
                closed[name].append(result)
                runs[run] = result["accepted"]
                table.add(*cells(name, "closed -t2 -c32", result), meter=meter)
        for name, (url, pid) in targets.items():
            run = f"{name[0]}rate-{uuid.uuid4().hex[:4]}"
            result, meter = run_wrk(
                url, pid, seconds=args.seconds, topic=topic, queries=args.queries,
                partitions=args.partitions, run=run, connections=16, rate=args.rate,
            )  # fmt: skip
            table.add(*cells(name, f"{args.rate}/s scheduled, -t2 -c16", result), meter=meter)
        # Kafka agrees with what the service accepted (the last service round's groups).
        time.sleep(3)
        last_run = next(r for r in reversed(list(runs)) if r.startswith("s") and "rate" not in r)
        sample = [f"bench-{last_run}-{q}" for q in range(0, args.queries, args.queries // 10)]
        committed = asyncio.run(committed_of(args.bootstrap, sample))
        empty = [g for g, offsets in committed.items() if not offsets]
    finally:
        bare.stop()
        sidecar.stop()
    table.print()
    ratio(
        "closed loop events/s, service / bare (medians)",
        statistics.median(r["events_per_s"] for r in closed["service"]),
        statistics.median(r["events_per_s"] for r in closed["bare"]),
    )
    print(f"Kafka read back for {len(sample)} groups of the last service round: "
          f"{len(sample) - len(empty)} committed, {len(empty)} with nothing")  # fmt: skip


if __name__ == "__main__":
    main()
