"""Soak: mixed load over hundreds of queries against the real service and broker, with
the service's RSS and open file descriptors reported at the start, along the way and at
the end.

    .venv/bin/python -m bench soak --seconds 600 --queries 300 --rate 200

Load, per second: ``rate`` progress events spread over ``queries`` queries (each its own
consumer group, 8 partitions of one real topic), plus reads of query state and a
``/metrics`` scrape. Every answer must be 200. ``tests/e2e/test_faults.py`` runs a short form.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar, create_topic
from bench.figures import CpuMeter, Table, broker_pid, rss_kib

PARTITIONS = 8


@dataclass
class SoakReport:
    seconds: float
    queries: int
    events: int = 0
    reads: int = 0
    errors: list[str] = field(default_factory=list)
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, rss KiB, fds)
    meter: CpuMeter = field(default_factory=CpuMeter)  # the service's and the broker's CPU

    def warm(self) -> tuple[float, int, int]:
        """The first sample once every group's client exists: after a tenth of the run, but
        not before 30 s (or half of a shorter run)."""
        after = max(self.seconds / 10, min(30.0, self.seconds / 2))
        return next(s for s in self.samples if s[0] >= after)

    def summary(self) -> str:
        start, end = self.warm(), self.samples[-1]
        peak = max(rss for _, rss, _ in self.samples)
        return (
            f"soak: {self.seconds:.0f} s, {self.queries} queries, {self.events} events, "
            f"{self.reads} reads, {len(self.errors)} errors; RSS at t={start[0]:.0f} s "
            f"{start[1] / 1024:.1f} MiB -> {end[1] / 1024:.1f} MiB at the end (peak "
            f"{peak / 1024:.1f}); fds {start[2]} -> {end[2]}"
        )


def _usage(pid: int) -> tuple[int, int]:
    return rss_kib(pid), len(os.listdir(f"/proc/{pid}/fd"))


def _progress(query: str, batch: int, topic: str) -> dict[str, Any]:
    return {
        "id": query,
        "runId": "soak-run",
        "batchId": batch,
        "sources": [{"endOffset": {topic: {str(p): batch * 100 + p for p in range(PARTITIONS)}}}],
    }


async def _load(url: str, pid: int, topic: str, report: SoakReport, rate: float) -> None:
    rng = random.Random(1)
    batches = [0] * report.queries
    queries = [f"soak-{i:04d}-{uuid.uuid4().hex[:6]}" for i in range(report.queries)]
    # Idle connections are dropped before uvicorn's 5 s keep-alive ends (httpx keeps them
    # 5 s too): a request sent on one the server is closing fails without reaching it.
    limits = httpx.Limits(keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=url, timeout=10, limits=limits) as client:

        async def post(i: int) -> None:
            batches[i] += 1
            answer = await client.post(
                "/v1/progress",
                json={
                    "group_id": f"group-{queries[i]}",
                    "progress": _progress(queries[i], batches[i], topic),
                },
            )
            report.events += 1
            if answer.status_code != 200 or answer.json()["outcome"] != "accepted":
                report.errors.append(f"event {answer.status_code}: {answer.text[:200]}")

        async def read(path: str) -> None:
            answer = await client.get(path)
            report.reads += 1
            if answer.status_code != 200:
                report.errors.append(f"GET {path} {answer.status_code}")

        started = time.monotonic()
        next_sample = started
        tick = 0
        while (elapsed := time.monotonic() - started) < report.seconds:
            if time.monotonic() >= next_sample:
                report.samples.append((elapsed, *_usage(pid)))
                next_sample += max(1.0, report.seconds / 20)
            per_tick = min(report.queries, max(1, int(rate / 10)))
            # Distinct queries per tick: two events of one query sent at once may arrive
            # in either order, and the service rightly calls the older one stale.
            jobs = [post(i) for i in rng.sample(range(report.queries), per_tick)]
            known = [i for i in range(report.queries) if batches[i] > 0]
            if known:
                jobs.append(read(f"/v1/queries/{queries[rng.choice(known)]}"))
            if tick % 10 == 0:
                jobs += [read("/metrics"), read("/v1/queries")]
            await asyncio.gather(*jobs)
            tick += 1
            await asyncio.sleep(max(0.0, started + tick / 10 - time.monotonic()))
        await asyncio.sleep(2)  # let the last commits land
        report.samples.append((time.monotonic() - started, *_usage(pid)))


def run_soak(bootstrap: str, seconds: float, queries: int, rate: float) -> SoakReport:
    topic = f"soak-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(bootstrap, topic, PARTITIONS))
    sidecar = Sidecar(bootstrap)
    report = SoakReport(seconds, queries)
    report.meter = CpuMeter(service=sidecar.process.pid, broker=broker_pid())
    try:
        report.samples.append((0.0, *_usage(sidecar.process.pid)))
        with report.meter:
            asyncio.run(_load(sidecar.url, sidecar.process.pid, topic, report, rate))
    except httpx.HTTPError as exc:
        raise RuntimeError(f"{exc!r} after {report.events} events\n{sidecar.log_tail()}") from exc
    finally:
        sidecar.stop()
    return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rate", type=float, default=200, help="events per second")
    args = parser.parse_args()
    report = run_soak(args.bootstrap, args.seconds, args.queries, args.rate)
    for elapsed, rss, fds in report.samples:
        print(f"  t={elapsed:6.0f} s  RSS {rss / 1024:7.1f} MiB  fds {fds}")
    start, end = report.warm(), report.samples[-1]
    table = Table(
        f"Soak: {args.rate:g} events/s over {args.queries} queries, reads and scrapes",
        "seconds", "events", "reads", "errors", f"RSS MiB at t={start[0]:.0f} s",
        "RSS MiB at the end", "peak RSS MiB", "fds warm -> end",
        cpu=("service", "broker", "bench"),
    )  # fmt: skip
    table.add(
        round(report.seconds), report.events, report.reads, len(report.errors),
        f"{start[1] / 1024:.1f}", f"{end[1] / 1024:.1f}",
        f"{max(rss for _, rss, _ in report.samples) / 1024:.1f}", f"{start[2]} -> {end[2]}",
        meter=report.meter,
    )  # fmt: skip
    table.print()
    if report.errors:
        print(json.dumps(report.errors[:10], indent=2))
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
