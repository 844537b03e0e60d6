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
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar, build_loadgen, cpu_seconds, create_topic


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))


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
    loadgen = build_loadgen()
    topic = f"memory-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(args.bootstrap, topic, args.partitions))
    service = Sidecar(args.bootstrap)
    try:
        time.sleep(2)
        empty = rss_kib(service.process.pid)
        started = time.monotonic()
        out = subprocess.run(
            [
                str(loadgen),
                f"-url={service.url}/v1/progress",
                f"-queries={args.queries}",
                f"-partitions={args.partitions}",
                f"-topic={topic}",
                f"-per-query={args.events}",
                "-seconds=3600",
                "-workers=64",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result = json.loads(out)
        if result["ok"] != args.queries * args.events:
            raise SystemExit(f"not every event was accepted: {result}")
        wait_until_idle(service.process.pid)
        settled = time.monotonic() - started
        loaded = rss_kib(service.process.pid)
        queries = json.loads(urllib.request.urlopen(service.url + "/v1/queries").read())
    finally:
        service.stop()
    held = len(queries)
    uncommitted = sum(1 for q in queries if q["slot"] is not None or q["in_flight"] is not None)
    per_query = (loaded - empty) * 1024 / args.queries
    print(
        f"| {args.queries} | {args.partitions} | {held} | {uncommitted} | {empty / 1024:.1f} | "
        f"{loaded / 1024:.1f} | {per_query:.0f} | {settled:.0f} |"
    )
    print(
        "columns: queries | partitions | queries the service lists | of them not yet "
        "committed | RSS empty MiB | RSS loaded MiB | bytes per query | seconds to settle"
    )


if __name__ == "__main__":
    main()
