"""The durable hot path against a bare FastAPI endpoint, side by side in one run, with a
light load generator (issue 18).

    .venv/bin/python -m bench http_throughput --rounds 2 --seconds 10

Load: ``wrk`` (C, one process; ``bench/wrk/progress.lua`` builds Spark-shaped progress
bodies: ``--queries`` queries x ``--partitions`` partitions, every request a new batch of
its query, each query's batches sent in order by one wrk thread). Closed loop with
``-t2 -c32`` in alternating rounds (bare, service, bare, ...), then ``--rate`` events/s
on a fixed schedule (16 connections, each request waiting for its slot) for the latency
at a set load.

The bare endpoint (``bench/bare_endpoint.py --json-only``) is FastAPI on uvicorn that
only ``json.loads`` the body and answers a small JSON. The service runs as shipped:
SQLite with ``synchronous=FULL`` (every 2xx on disk), committing to the real broker.

Every figure has beside it the CPU seconds of the server process (and of its main thread,
the event loop, alone), of wrk itself and of the local broker (``scripts/local-kafka.sh``'s;
the bare endpoint does not use it, the service commits to it), from /proc, and CPU per
event (server CPU / events). At the end, Kafka is read back
for a sample of groups: what the service said it accepted is what is committed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import TICKS, Bare, Sidecar, cpu_seconds, create_topic
from harness.machine import ROOT

WRK_SCRIPT = ROOT / "bench" / "wrk" / "progress.lua"


def main_thread_cpu(pid: int) -> float:
    """User + system CPU of ``pid``'s main thread alone (the service's event loop: HTTP,
    Kafka commits, the ledger's decisions); the rest of the process's is its threads' (the
    store's)."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:13]) / TICKS


def broker_pid() -> int | None:
    """The broker's pid (``python -m bench``'s, or ``scripts/local-kafka.sh``'s pid file),
    if it runs: its CPU is beside the service's, as the bare endpoint makes no use of it."""
    given = os.environ.get("BENCH_KAFKA_PID")
    if given and Path(f"/proc/{given}").exists():
        return int(given)
    folder = ROOT / os.environ.get("LOCAL_KAFKA_DIR", ".local/kafka")  # relative: to ROOT
    with contextlib.suppress(FileNotFoundError, ValueError):
        pid = int((folder / "kafka.pid").read_text())
        if Path(f"/proc/{pid}").exists():
            return pid
    return None


def steal_ticks() -> int:
    return int(Path("/proc/stat").read_text().split("\n")[0].split()[8])


def all_ticks() -> int:
    return sum(int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:9])


def cpu_until_exit(processes: list[subprocess.Popen[str]]) -> float:
    """Wait for ``processes`` to exit; the CPU seconds they used, from each one's last
    reading in /proc before it exited (a load generator's own share)."""
    last: dict[int, float] = {}
    while any(p.poll() is None for p in processes):
        for p in processes:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                last[p.pid] = cpu_seconds(p.pid)
        time.sleep(0.2)
    return sum(last.values())


def wrk_summary(out: str) -> dict[str, Any]:
    """The JSON line that ``bench/wrk/progress.lua`` prints when wrk is done."""
    summary = [line for line in out.splitlines() if line.startswith("{")]
    if not summary:
        raise RuntimeError(f"wrk printed no summary:\n{out}")
    result: dict[str, Any] = json.loads(summary[-1])
    return result


def run_wrk(
    url: str, pid: int, *, seconds: float, topic: str, queries: int, partitions: int,
    run: str, connections: int = 32, rate: int = 0,
) -> dict[str, Any]:  # fmt: skip
    env = {
        **os.environ,
        "TOPIC": topic,
        "QUERIES": str(queries),
        "PARTITIONS": str(partitions),
        "RATE": str(rate),
        "RUN": run,
        "THREADS": "2",
    }
    server_before, loop_before = cpu_seconds(pid), main_thread_cpu(pid)
    broker = broker_pid()
    broker_before = cpu_seconds(broker) if broker else 0.0
    steal_before, ticks_before = steal_ticks(), all_ticks()
    wrk = subprocess.Popen(
        [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{round(seconds)}s",
            "--latency",
            "-s",
            str(WRK_SCRIPT),
            url,
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    wrk_cpu = cpu_until_exit([wrk])
    out, _ = wrk.communicate()
    server_cpu = cpu_seconds(pid) - server_before
    loop_cpu = main_thread_cpu(pid) - loop_before
    broker_cpu = cpu_seconds(broker) - broker_before if broker else float("nan")
    steal = 100 * (steal_ticks() - steal_before) / max(1, all_ticks() - ticks_before)
    result = wrk_summary(out)
    result.update(
        events_per_s=result["requests"] / result["seconds"],
        server_cpu_s=server_cpu,
        wrk_cpu_s=wrk_cpu,
        broker_cpu_s=broker_cpu,
        cpu_ms_per_event=1000 * server_cpu / max(1, result["requests"]),
        loop_ms_per_event=1000 * loop_cpu / max(1, result["requests"]),
        steal_pct=steal,
    )
    return result


def line(target: str, mode: str, r: dict[str, Any]) -> str:
    return (
        f"| {target} | {mode} | {r['requests']:,} | {r['events_per_s']:,.0f} | "
        f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['non2xx'] + r['socket_errors']} | "
        f"{r['server_cpu_s']:.1f} | {r['cpu_ms_per_event']:.3f} | {r['loop_ms_per_event']:.3f} | "
        f"{r['wrk_cpu_s']:.1f} | {r['broker_cpu_s']:.1f} | "
        f"{r['steal_pct']:.0f} |"
    )


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
    args = parser.parse_args()

    topic = f"bench-http-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(args.bootstrap, topic, args.partitions))
    bare, sidecar = Bare(json_only=True), Sidecar(args.bootstrap)
    targets = {"bare": (bare.url, bare.process.pid), "service": (sidecar.url, sidecar.process.pid)}
    rows: list[str] = []
    closed: dict[str, list[dict[str, Any]]] = {"bare": [], "service": []}
    runs: dict[str, int] = {}
    try:
        for round_ in range(args.rounds):
            for name, (url, pid) in targets.items():
                run = f"{name[0]}{round_}-{uuid.uuid4().hex[:4]}"
                result = run_wrk(
                    url, pid, seconds=args.seconds, topic=topic, queries=args.queries,
                    partitions=args.partitions, run=run,
                )  # fmt: skip
                closed[name].append(result)
                runs[run] = result["accepted"]
                rows.append(line(name, "closed -t2 -c32", result))
                print(rows[-1], flush=True)
        for name, (url, pid) in targets.items():
            run = f"{name[0]}rate-{uuid.uuid4().hex[:4]}"
            result = run_wrk(
                url, pid, seconds=args.seconds, topic=topic, queries=args.queries,
                partitions=args.partitions, run=run, connections=16, rate=args.rate,
            )  # fmt: skip
            rows.append(line(name, f"{args.rate}/s scheduled, -t2 -c16", result))
            print(rows[-1], flush=True)
        # Kafka agrees with what the service accepted (the last service round's groups).
        time.sleep(3)
        last_run = next(r for r in reversed(list(runs)) if r.startswith("s") and "rate" not in r)
        sample = [f"bench-{last_run}-{q}" for q in range(0, args.queries, args.queries // 10)]
        committed = asyncio.run(committed_of(args.bootstrap, sample))
        empty = [g for g, offsets in committed.items() if not offsets]
    finally:
        bare.stop()
        sidecar.stop()

    bare_rate = statistics.median(r["events_per_s"] for r in closed["bare"])
    service_rate = statistics.median(r["events_per_s"] for r in closed["service"])
    print()
    print(
        "| target | load | events | events/s | p50 ms | p99 ms | errors | server CPU s | "
        "CPU ms/event | of which main thread | wrk CPU s | broker CPU s | steal % |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(
        f"\nclosed loop medians: bare {bare_rate:,.0f}/s, service {service_rate:,.0f}/s, "
        f"ratio {service_rate / bare_rate:.2f}"
    )
    print(f"Kafka read back for {len(sample)} groups of the last service round: "
          f"{len(sample) - len(empty)} committed, {len(empty)} with nothing")  # fmt: skip


if __name__ == "__main__":
    main()
