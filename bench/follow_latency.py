"""Batch end -> offsets committed in Kafka, for one job attached the three ways side by
side: followed through its checkpoint folder, reported by the Python listener, reported
by the JVM listener (attached by configuration alone).

One real streaming query (Spark's Kafka connector, a 1-second trigger, 4 partitions, a
producer writing continuously) with its checkpoint in a local folder. Three sidecar
processes: one follows the folder into group F (no listener involved, polling every
``--interval`` s), one gets the Python listener's events for group L, one the JVM
listener's (``scripts/build-jvm-listener.sh``) for group J. A poller reads every group's
committed offsets from the broker every 5 ms and notes when each batch id (from the commit
metadata) first appears. Batch end = progress timestamp + ``triggerExecution``.

    .venv/bin/python -m bench follow_latency [--seconds 60] [--interval 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.batch_commits import batch_end, started_query, wait_committed, watch_commits
from bench.bench_support import (
    Sidecar,
    create_topic,
    percentiles,
    produce_in_background,
    spark_pid,
)
from bench.figures import CpuMeter, Table, broker_pid, ratio
from harness.machine import ROOT
from jobs.spark_session import kafka_connector_jars, kafka_spark_session
from spark_offset_listener.listener import OffsetCommitListener

PATHS = {"follower (checkpoint)": "f", "listener (events)": "l", "JVM listener (conf)": "j"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=float, default=2000)
    parser.add_argument("--interval", type=float, default=1.0, help="the follower's polling")
    args = parser.parse_args()

    topic = f"bench-follow-{uuid.uuid4().hex[:8]}"
    groups = {name: f"bench-{short}-{uuid.uuid4().hex[:8]}" for name, short in PATHS.items()}
    followed, listened, jvm = groups.values()
    asyncio.run(create_topic(args.bootstrap, topic, 4))
    follower = Sidecar(args.bootstrap, follow_interval_seconds=args.interval)
    reporter = Sidecar(args.bootstrap)
    jvm_reporter = Sidecar(args.bootstrap)
    jar = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-jvm-listener.sh")],
        check=True, capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    spark = kafka_spark_session(
        "bench-follow-latency",
        conf={
            "spark.jars": ",".join([*kafka_connector_jars(), jar]),
            "spark.sql.streaming.streamingQueryListeners": (
                "dev.sparkoffsetsidecar.listener.OffsetCommitListener"
            ),
            "spark.offsetSidecar.url": jvm_reporter.url,
            "spark.offsetSidecar.group": jvm,
        },
    )
    spark.streams.addListener(OffsetCommitListener(reporter.url, group_id=listened))
    seen: dict[str, dict[int, float]] = {group: {} for group in groups.values()}
    stop = threading.Event()
    watchers = [watch_commits(args.bootstrap, g, seen[g], stop) for g in seen]
    services = dict(zip(groups, (follower, reporter, jvm_reporter), strict=True))
    # One meter a path, over the same window: its own service, and the shared Spark job.
    meters = {
        name: CpuMeter(service=s.process.pid, spark=spark_pid(spark), broker=broker_pid())
        for name, s in services.items()
    }
    with tempfile.TemporaryDirectory() as work, contextlib.ExitStack() as window:
        for meter in meters.values():
            window.enter_context(meter)
        checkpoint = f"{work}/checkpoint"
        follower.post("/v1/followed-folders", {"path": checkpoint, "group_id": followed})
        query = started_query(spark, args.bootstrap, topic, checkpoint)
        producer = produce_in_background(args.bootstrap, topic, args.rate, args.seconds)
        producer.join()
        progresses = wait_committed(query, list(seen.values()))
        query.stop()
    stop.set()
    for watcher in watchers:
        watcher.join(10)
    spark.stop()
    follower.stop()
    reporter.stop()
    jvm_reporter.stop()

    table = Table(
        f"batch end -> offsets committed in Kafka; {len(progresses)} progress events, the "
        f"follower polls every {args.interval:g} s, the committed offsets read every 5 ms. "
        "'own': batches committed as themselves; 'covered': every batch, until a commit of "
        "it or of a newer batch (the follower commits the newest batch of each poll)",
        "path", "own", "p50 ms", "p99 ms", "max ms", "covered", "p50 ms", "p99 ms", "max ms",
        cpu=("service", "spark", "broker", "bench"),
    )  # fmt: skip
    figures = {}
    for name, group in groups.items():
        batches = [p for p in progresses if p["numInputRows"] > 0]
        own = [
            (seen[group][p["batchId"]] - batch_end(p)) * 1000
            for p in batches
            if p["batchId"] in seen[group]
        ]
        covered = []
        for p in batches:
            later = [at for batch, at in seen[group].items() if batch >= p["batchId"]]
            if later:
                covered.append((min(later) - batch_end(p)) * 1000)
        if not covered:
            raise SystemExit(f"{name}: no batch was seen committed in Kafka")
        # A path may commit no batch as itself (the follower: the newest of each poll).
        o50, o99, _ = percentiles(own) if own else (None, None, None)
        c50, c99, _ = percentiles(covered)
        figures[name] = c50
        table.add(
            name, len(own), o50, o99, max(own, default=None), len(covered), c50, c99,
            max(covered), meter=meters[name],
        )  # fmt: skip
    table.print()
    listener = figures["listener (events)"]
    ratio("p50 (covered), follower / listener", figures["follower (checkpoint)"], listener)
    ratio("p50 (covered), JVM listener / Python listener", figures["JVM listener (conf)"], listener)
    return 0


if __name__ == "__main__":
    sys.exit(main())
