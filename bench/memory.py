"""Memory held by the service per query: RSS of a real service process before and after
``--queries`` queries, each with ``--partitions`` partitions, have been accepted (and
committed to the real broker).

    .venv/bin/python -m bench memory --queries 10000 --partitions 32

Each query sends ``--events`` progress events (its own consumer group, one real topic).
Bytes per query = (RSS loaded - RSS empty) / queries, after the commits have settled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar, build_loadgen, create_topic, load
from bench.figures import CpuMeter, Table, broker_pid, cpu_seconds, rss_kib


def wait_until_idle(pid: int, timeout: float = 300) -> None:
    """Until the service used under 2 % of a core for 3 s: the commits are done. (Asking
    the service would allocate answers about 10,000 groups and spoil the figure.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(3)
        if cpu_seconds(pid) - before < 0.06:
            return
    raise SystemExit("the service did not settle")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--events", type=int, default=2)
    args = parser.parse_args()
    build_loadgen()
    topic = f"memory-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(args.bootstrap, topic, args.partitions))
    service = Sidecar(args.bootstrap)
    try:
        time.sleep(2)
        empty = rss_kib(service.process.pid)
        started = time.monotonic()
        with CpuMeter(service=service.process.pid, broker=broker_pid()) as meter:
            shape = argparse.Namespace(queries=args.queries, partitions=args.partitions, workers=64)
            result = load(
                service.url, shape, 0, topic=topic, seconds=3600, **{"per-query": args.events}
            )
            if result["ok"] != args.queries * args.events:
                raise SystemExit(f"not every event was accepted: {result}")
            wait_until_idle(service.process.pid)
        meter.add("loadgen", result["loadgen_cpu_s"])
        settled = time.monotonic() - started
        loaded = rss_kib(service.process.pid)
        queries = json.loads(urllib.request.urlopen(service.url + "/v1/queries").read())
    finally:
        service.stop()
    uncommitted = sum(1 for q in queries if q["slot"] is not None or q["in_flight"] is not None)
    table = Table(
        f"{args.events} events per query, then idle",
        "queries", "partitions", "queries the service lists", "of them not yet committed",
        "RSS empty MiB", "RSS loaded MiB", "bytes per query", "seconds to settle",
        cpu=("service", "broker", "loadgen", "bench"),
    )  # fmt: skip
    table.add(
        args.queries, args.partitions, len(queries), uncommitted, f"{empty / 1024:.1f}",
        f"{loaded / 1024:.1f}", round((loaded - empty) * 1024 / args.queries), round(settled),
        meter=meter,
    )  # fmt: skip
    table.print()


if __name__ == "__main__":
    main()
