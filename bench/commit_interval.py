"""A commit interval against committing every checkpoint, and both against a bare FastAPI
endpoint, side by side in one run (issue 33).

    .venv/bin/python -m bench commit_interval --queries 500 5000 --rounds 2 --seconds 10

Three servers run at once: the bare endpoint (``bench/bare_endpoint.py --json-only``), the
service committing every checkpoint (``SIDECAR_MIN_COMMIT_INTERVAL_SECONDS=0``, as
shipped) and the service with a 1 s interval; each on SQLite with ``synchronous=FULL``,
committing to the local broker. For each number of queries, closed-loop rounds of wrk
(``-t2 -c32``, Spark-shaped bodies, ``bench/wrk/progress.lua``) alternate between them;
beside every row the CPU of the server, of its event loop, of wrk and of the broker
(``http_throughput.run_wrk``), and for the services the commits they made a second
(``sidecar_commits_succeeded_total``, read before and after the round).

Then each service takes ``--rate`` events/s on a fixed schedule while a probe posts
batches of 4 groups of its own, one batch of a group at a time, and reads the group's
committed offset from Kafka every 20 ms: batch end (the 2xx) -> committed, p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client.parser import text_string_to_metric_families

from bench.bench_support import Bare, Sidecar, create_topic, percentiles
from bench.figures import CpuMeter, Table, ratio
from bench.http_throughput import SIDES, run_wrk

PROBE_GROUPS = 4


def commits_made(url: str) -> tuple[float, float]:
    """The service's successful commits so far, all groups, and when they were counted:
    the middle of the scrape's exchange (at 5,000 groups /metrics takes seconds to render
    and parse; parsing is after the exchange, so it does not count)."""
    sent = time.monotonic()
    with urllib.request.urlopen(url + "/metrics", timeout=120) as answer:
        text = answer.read().decode()
    at = (sent + time.monotonic()) / 2
    total = sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "sidecar_commits_succeeded_total"
    )
    return total, at


def commit_rate(url: str, before: tuple[float, float]) -> float:
    """Commits a second since ``before`` (a ``commits_made`` reading)."""
    total, at = commits_made(url)
    return (total - before[0]) / (at - before[1])


class Probe(threading.Thread):
    """Batches of ``PROBE_GROUPS`` groups of its own, one at a time per group: the time
    from the 2xx to the batch's offset read back from Kafka."""

    def __init__(self, url: str, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.url, self.bootstrap, self.topic = url, bootstrap, topic
        self.latencies: list[float] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        import httpx
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            async with httpx.AsyncClient(base_url=self.url, timeout=30) as client:
                tag = uuid.uuid4().hex[:6]
                groups = [f"probe-{tag}-{i}" for i in range(PROBE_GROUPS)]
                await asyncio.gather(*(self._group(client, admin, g) for g in groups))
        finally:
            await admin.close()

    async def _group(self, client: Any, admin: Any, group: str) -> None:
        batch = 0
        while not self.stopping.is_set():
            batch += 1
            progress = {
                "id": f"q-{group}",
                "batchId": batch,
                "sources": [{"endOffset": {self.topic: {"0": batch}}}],
            }
            answer = await client.post(
                "/v1/progress", json={"group_id": group, "progress": progress}
            )
            answered = time.monotonic()
            if answer.status_code != 200:
                raise RuntimeError(f"probe event refused: {answer.text}")
            while not self.stopping.is_set():
                found = await admin.list_consumer_group_offsets(group)
                if any(meta.offset >= batch for meta in found.values()):
                    self.latencies.append(time.monotonic() - answered)
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--queries", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()

    topic = f"bench-interval-{uuid.uuid4().hex[:8]}"
    probe_topic = f"bench-probe-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(args.bootstrap, topic, args.partitions))
    asyncio.run(create_topic(args.bootstrap, probe_topic, 1))
    bare = Bare(json_only=True)
    every = Sidecar(args.bootstrap, min_commit_interval_seconds=0)
    interval = Sidecar(args.bootstrap, min_commit_interval_seconds=args.interval)
    services = {"service, interval 0": every, f"service, interval {args.interval:g} s": interval}
    targets = {"bare FastAPI": (bare.url, bare.process.pid)}
    targets.update({name: (s.url, s.process.pid) for name, s in services.items()})
    table = Table(
        f"{args.partitions} partitions, {args.seconds:g} s a run",
        "queries", "target", "load", "events/s", "p50 ms", "p99 ms", "errors",
        "server CPU ms/event", "of which main thread", "broker CPU ms/event", "commits/s",
        "batch end -> committed p50 / p99 ms (probes)",
        cpu=SIDES,
    )  # fmt: skip
    rates: dict[tuple[int, str], list[float]] = {}
    try:
        for queries in args.queries:
            for round_ in range(args.rounds):
                for index, (name, (url, pid)) in enumerate(targets.items()):
                    before = commits_made(url) if name in services else (0.0, 0.0)
                    run = f"t{index}r{round_}-{uuid.uuid4().hex[:4]}"
                    result, meter = run_wrk(
                        url, pid, seconds=args.seconds, topic=topic, queries=queries,
                        partitions=args.partitions, run=run,
                    )  # fmt: skip
                    commits = commit_rate(url, before) if name in services else None
                    rates.setdefault((queries, name), []).append(result["events_per_s"])
                    table.add(
                        *cells(queries, name, "closed -t2 -c32", result, meter, commits, ""),
                        meter=meter,
                    )
            for index, (name, service) in enumerate(services.items()):
                probe = Probe(service.url, args.bootstrap, probe_topic)
                before = commits_made(service.url)
                probe.start()
                result, meter = run_wrk(
                    service.url, service.process.pid, seconds=args.seconds, topic=topic,
                    queries=queries, partitions=args.partitions, connections=16,
                    rate=args.rate, run=f"rate{index}-{uuid.uuid4().hex[:4]}",
                )  # fmt: skip
                probe.stopping.set()
                probe.join(30)
                commits = commit_rate(service.url, before)
                p50, p99, _ = percentiles(probe.latencies) if probe.latencies else (0, 0, 0)
                probes = f"{1000 * p50:.0f} / {1000 * p99:.0f} ({len(probe.latencies)})"
                load = f"{args.rate}/s scheduled"
                table.add(*cells(queries, name, load, result, meter, commits, probes), meter=meter)
    finally:
        bare.stop()
        for service in services.values():
            service.stop()

    table.print()
    for queries in args.queries:
        base = statistics.median(rates[(queries, "bare FastAPI")])
        for name in services:
            median = statistics.median(rates[(queries, name)])
            ratio(f"{queries} queries, closed-loop events/s, {name} / bare FastAPI", median, base)


def cells(
    queries: int,
    target: str,
    load: str,
    r: dict[str, Any],
    meter: CpuMeter,
    commits_per_s: float | None,
    probes: str,
) -> tuple[object, ...]:
    """A row's figures; ``commits_per_s`` over the time between the two reads of the
    service's counter (wrk's start-up and the probe's end included), not wrk's seconds."""
    broker = meter.seconds("broker")
    per_event = None if broker is None else f"{1000 * broker / max(1, r['requests']):.3f}"
    return (
        queries, target, load, round(r["events_per_s"]), r["p50_ms"], r["p99_ms"], r["errors"],
        f"{r['cpu_ms_per_event']:.3f}", f"{r['loop_ms_per_event']:.3f}", per_event,
        commits_per_s, probes,
    )  # fmt: skip


if __name__ == "__main__":
    main()
