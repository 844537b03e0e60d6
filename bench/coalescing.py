"""Coalescing on a slow broker: commits take longer than the checkpoint interval; each
group keeps at most one commit in flight, skips what a newer checkpoint replaced, and its
newest offsets land within about one commit time after its last event.

    .venv/bin/python -m bench coalescing --groups 20 --interval 0.1 --seconds 10

A broker of its own (real Kafka, KRaft) is slowed by freezing it (SIGSTOP) for
``--frozen`` seconds out of every ``--frozen + --running``, so an offset commit takes
about ``--frozen`` seconds. Each group's query completes a batch every ``--interval``
seconds. The service's ``/metrics`` (which the broker does not slow) is sampled every
20 ms for the groups' commits in flight and committed offsets.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar, create_topic
from bench.figures import CpuMeter, Table
from harness.kafka_broker import LocalBroker
from harness.machine import free_port

PARTITIONS = 4


def slow_down(broker: LocalBroker, frozen: float, running: float, stop: threading.Event) -> None:
    while not stop.is_set():
        broker.pause()
        time.sleep(frozen)
        broker.resume()
        time.sleep(running)
    broker.resume()


def sample(text: str) -> tuple[dict[str, float], dict[tuple[str, str], float], dict[str, float]]:
    """(in flight by group, committed offset by (group, partition), commits: each group's
    successes by "group/unt", and the sum and count of every commit's duration by "/sum" and
    "/unt"; the histogram is for all groups)."""
    in_flight, committed, durations = {}, {}, {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            group = s.labels.get("consumergroup", "")
            if s.name == "sidecar_commit_in_flight":
                in_flight[group] = s.value
            elif s.name == "sidecar_committed_offset":
                committed[(group, s.labels["partition"])] = s.value
            elif s.name == "sidecar_commits_succeeded_total":
                durations[f"{group}/unt"] = s.value
            elif s.name.startswith("sidecar_commit_duration_seconds_") and s.name[-3:] in (
                "sum",
                "unt",
            ):
                durations[f"/{s.name[-3:]}"] = s.value
    return in_flight, committed, durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--frozen", type=float, default=0.4)
    parser.add_argument("--running", type=float, default=0.05)
    args = parser.parse_args()
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="kafka-"))  # removed with the broker
    broker = LocalBroker(f"127.0.0.1:{port}", port, folder, started_here=True)
    broker.start()
    stop = threading.Event()
    try:
        topic = f"coalesce-{uuid.uuid4().hex[:6]}"
        asyncio.run(create_topic(broker.bootstrap, topic, PARTITIONS))
        # Per-partition series and a fresh build at every scrape: it watches each commit.
        service = Sidecar(
            broker.bootstrap,
            metrics_granularity="partition",
            metrics_max_age_seconds=0,
            metrics_max_scrapes_per_second=0,
        )
        groups = [f"coalesce-{uuid.uuid4().hex[:6]}-{i}" for i in range(args.groups)]
        http = httpx.Client(base_url=service.url, timeout=10)
        max_in_flight = 0.0
        slower = threading.Thread(
            target=slow_down, args=(broker, args.frozen, args.running, stop), daemon=True
        )
        slower.start()
        meter = CpuMeter(service=service.process.pid, broker=broker.pid()).start()
        started, batch, last_sent = time.monotonic(), 0, 0.0
        while time.monotonic() - started < args.seconds:
            batch += 1
            for group in groups:
                answer = http.post(
                    "/v1/progress",
                    json={
                        "group_id": group,
                        "progress": {
                            "id": f"q-{group}",
                            "runId": "r",
                            "batchId": batch,
                            "sources": [
                                {"endOffset": {topic: {str(p): batch for p in range(PARTITIONS)}}}
                            ],
                        },
                    },
                )
                answer.raise_for_status()
            last_sent = time.monotonic()
            in_flight, _, _ = sample(http.get("/metrics").text)
            max_in_flight = max([max_in_flight, *in_flight.values()])
            time.sleep(max(0.0, started + batch * args.interval - time.monotonic()))
        interval = (last_sent - started) / batch  # achieved (posting takes time too)
        landed: dict[str, float] = {}
        while len(landed) < len(groups) and time.monotonic() - last_sent < 60:
            in_flight, committed, durations = sample(http.get("/metrics").text)
            max_in_flight = max([max_in_flight, *in_flight.values()])
            for group in groups:
                if group not in landed and all(
                    committed.get((group, str(p))) == batch for p in range(PARTITIONS)
                ):
                    landed[group] = time.monotonic() - last_sent
            time.sleep(0.02)
        text = http.get("/metrics").text
        meter.stop()
        stop.set()
        service.stop()
    finally:
        stop.set()
        broker.resume()
        broker.stop()
        shutil.rmtree(folder, ignore_errors=True)
    _, _, durations = sample(text)
    commits = [durations[f"{g}/unt"] for g in groups]
    mean_commit = durations["/sum"] / durations["/unt"]
    table = Table(
        f"{args.groups} groups, a batch every {interval * 1000:.0f} ms (asked "
        f"{args.interval * 1000:.0f}) for {args.seconds:.0f} s; broker frozen "
        f"{args.frozen * 1000:.0f} ms of every {(args.frozen + args.running) * 1000:.0f} ms",
        "batches/group", "commits/group (mean)", "max in flight per group", "mean commit s",
        "last event -> newest landed s: p50 / max", "all landed",
        cpu=("service", "broker", "bench"),
    )  # fmt: skip
    table.add(
        batch, f"{statistics.fmean(commits):.1f}", round(max_in_flight), f"{mean_commit:.2f}",
        f"{statistics.median(landed.values()):.2f} / {max(landed.values()):.2f}",
        f"{len(landed)}/{len(groups)}", meter=meter,
    )  # fmt: skip
    table.print()


if __name__ == "__main__":
    main()
