"""Callback throughput and latency of the service against a bare uvicorn endpoint that only
parses the same JSON (``bench/bare_endpoint.py``), in one run.

    scripts/local-kafka.sh start
    .venv/bin/python bench/callback_throughput.py --rounds 3 --seconds 10

The load comes from ``bench/loadgen`` (Go, standard library; built here with ``go build``)
so that the generator costs little of the 2 cores: Spark-shaped progress events over
``--queries`` queries (one consumer group each, ``--partitions`` partitions), each
query's batches in order. Closed loop (as fast as answers come) for the sustained rate,
in alternating rounds (bare, service, bare, ...) so that both see the same noise; then
open loop at ``--rate`` events/s for latency. The service runs as shipped: SQLite with
``synchronous=FULL`` (every 2xx durable), the commit loop committing to the real broker.
CPU steal (other tenants of the machine) is printed with each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar
from harness.machine import ROOT, free_port

LOADGEN = ROOT / ".local" / "bin" / "loadgen"


def build_loadgen() -> Path:
    LOADGEN.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "build", "-o", str(LOADGEN), "."], cwd=ROOT / "bench" / "loadgen", check=True
    )
    return LOADGEN


class Bare:
    """``bench/bare_endpoint.py`` as a process (``json_only``: its json-only variant)."""

    def __init__(self, *, json_only: bool = False) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        variant = ["--json-only"] if json_only else []
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "bare_endpoint.py"), str(self.port), *variant]
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def cpu_times() -> list[int]:
    return [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]


def load(
    url: str,
    args: argparse.Namespace,
    first_batch: int,
    *,
    allow_errors: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """Run the load generator against ``url`` (several: comma-separated, round robin);
    failed events end the benchmark unless ``allow_errors`` (they are then a figure)."""
    before = cpu_times()
    endpoints = ",".join(f"{base}/v1/progress" for base in url.split(","))
    command = [
        str(LOADGEN),
        f"-url={endpoints}",
        f"-queries={args.queries}",
        f"-partitions={args.partitions}",
        f"-first-batch={first_batch}",
        f"-workers={args.workers}",
    ] + [f"-{k}={v}" for k, v in extra.items()]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    after = cpu_times()
    result: dict[str, Any] = json.loads(out)
    delta = [a - b for a, b in zip(after, before, strict=True)]
    result["steal_pct"] = 100.0 * delta[7] / max(1, sum(delta))  # 8th field: steal
    if (result["errors"] or result["non_2xx"]) and not allow_errors:
        raise SystemExit(f"{url}: failures during the run: {result}")
    return result


def row(name: str, r: dict[str, Any]) -> str:
    return (
        f"| {name} | {r['mode']} | {r['sent']} | {r['events_per_second']:.0f} | "
        f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['steal_pct']:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--rate", type=float, default=1000)
    args = parser.parse_args()
    build_loadgen()
    bare, ours = Bare(), Sidecar(args.bootstrap)
    try:
        rows: list[str] = []
        closed: dict[str, list[float]] = {"bare": [], "service": []}
        batch = 0
        for _ in range(args.rounds):
            for name, url in (("bare", bare.url), ("service", ours.url)):
                batch += 1_000_000
                result = load(url, args, batch, seconds=args.seconds)
                closed[name].append(result["events_per_second"])
                rows.append(row(name, result))
                print(rows[-1], flush=True)
        for name, url in (("bare", bare.url), ("service", ours.url)):
            batch += 1_000_000
            result = load(url, args, batch, seconds=args.seconds, rate=args.rate)
            rows.append(row(name, result))
            print(rows[-1], flush=True)
        metrics = urllib.request.urlopen(ours.url + "/metrics").read().decode()
        batches = [
            line
            for line in metrics.splitlines()
            if line.startswith(("sidecar_store_batch_items_", "sidecar_store_write_duration"))
            and "_bucket" not in line
            and "_created" not in line
        ]
    finally:
        bare.stop()
        ours.stop()
    bare_rate, our_rate = statistics.median(closed["bare"]), statistics.median(closed["service"])
    print()
    print(f"{os.cpu_count()} cores; {args.queries} queries x {args.partitions} partitions")
    print("| target | mode | events | events/s | p50 ms | p99 ms | steal % |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(
        f"median closed-loop rate: bare {bare_rate:.0f}/s, service {our_rate:.0f}/s, "
        f"ratio {our_rate / bare_rate:.2f}"
    )
    print("\n".join(batches))


if __name__ == "__main__":
    main()
