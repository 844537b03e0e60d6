"""The commit path at scale: many groups through the service's ``KafkaOffsetCommitter``
against a raw single aiokafka commit, in one run on the real broker.

    .venv/bin/python -m bench commit_scale --groups 1000 --partitions 16

Figures:
  raw         one ``AIOKafkaConsumer(group_id=...)`` committing ``--partitions`` offsets,
              one commit at a time: aiokafka's own commit latency, the reference.
  sequential  the committer, one commit at a time, cycling over ``--groups`` groups.
  concurrent  the committer with ``--concurrency`` commits in flight (the commit loop's
              default is 64), cycling over the groups: commits per second and latency.
  connections TCP connections of this process to the broker, after 10, 100 and all groups
              have committed (must not grow with the number of groups); and, for
              comparison, with one aiokafka consumer per group after 100 groups.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTopicPartition

from bench.bench_support import create_topic, percentiles
from bench.figures import CpuMeter, Table, broker_pid
from spark_offset_sidecar.adapters.kafka.committer import KafkaOffsetCommitter
from spark_offset_sidecar.core.ledger.changes import Checkpoint, CommitRequest
from spark_offset_sidecar.core.offsets import TopicPartition


def broker_connections(port: int) -> int:
    """Established TCP connections of this process to ``port`` on 127.0.0.1."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state, inode = fields[2], fields[3], fields[9]
        if state == "01" and int(remote.split(":")[1], 16) == port and inode in inodes:
            count += 1
    return count


def request(group: str, topic: str, partitions: int, batch: int) -> CommitRequest:
    offsets = {TopicPartition(topic, p): batch * 10 + p for p in range(partitions)}
    checkpoint = Checkpoint(f"q-{group}", group, batch, "run", offsets, time.time())
    return CommitRequest(checkpoint, offsets, attempt=1, held_back=(), rewind=False)


async def raw_commits(bootstrap: str, topic: str, partitions: int, n: int) -> list[float]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"raw-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
    )
    await consumer.start()
    tps = [KafkaTopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.pause(*tps)
    times = []
    try:
        for batch in range(n + 5):
            started = time.perf_counter()
            await consumer.commit({tp: batch * 10 + tp.partition for tp in tps})
            if batch >= 5:  # the first commits find the coordinator
                times.append((time.perf_counter() - started) * 1000)
    finally:
        await consumer.stop()
    return times


async def consumer_per_group(bootstrap: str, topic: str, partitions: int, groups: int) -> int:
    """Connections when every group has its own consumer (this project's first design,
    and what a committer built on the consumer API does)."""
    port = int(bootstrap.rsplit(":", 1)[1])
    consumers = []
    tps = [KafkaTopicPartition(topic, p) for p in range(partitions)]
    try:
        for i in range(groups):
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=f"per-group-{uuid.uuid4().hex[:6]}-{i}",
                enable_auto_commit=False,
            )
            await consumer.start()
            consumers.append(consumer)
            consumer.assign(tps)
            consumer.pause(*tps)
            await consumer.commit({tp: 1 for tp in tps})
        return broker_connections(port)
    finally:
        for consumer in consumers:
            await consumer.stop()


async def measure() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--sequential", type=int, default=500)
    args = parser.parse_args()
    port = int(args.bootstrap.rsplit(":", 1)[1])
    topic = f"commit-scale-{uuid.uuid4().hex[:8]}"
    await create_topic(args.bootstrap, topic, args.partitions)
    prefix = uuid.uuid4().hex[:6]
    groups = [f"scale-{prefix}-{i:05d}" for i in range(args.groups)]

    # The committer runs in this process: its CPU is the ``bench`` side.
    table = Table(
        f"{args.groups} groups x {args.partitions} partitions, topic {topic}",
        "run", "commits", "commits/s", "p50 ms", "p99 ms", "p50 vs raw",
        cpu=("broker", "bench"),
    )  # fmt: skip
    with CpuMeter(broker=broker_pid()) as raw_meter:
        raw = await raw_commits(args.bootstrap, topic, args.partitions, args.sequential)
    per_group = await consumer_per_group(args.bootstrap, topic, args.partitions, 100)

    committer = KafkaOffsetCommitter({"bootstrap_servers": args.bootstrap}, timeout=30)
    connections: dict[int, int] = {}
    batch = 0
    for i, group in enumerate(groups):  # every group once: its coordinator is looked up
        await committer.commit(request(group, topic, args.partitions, batch))
        if i + 1 in (10, 100, len(groups)):
            connections[i + 1] = broker_connections(port)
    sequential = []
    sequential_meter = CpuMeter(broker=broker_pid()).start()
    for i in range(args.sequential):
        batch += 1
        started = time.perf_counter()
        await committer.commit(request(groups[i % len(groups)], topic, args.partitions, batch))
        sequential.append((time.perf_counter() - started) * 1000)
    sequential_meter.stop()

    concurrent: list[float] = []
    next_group = 0
    deadline = time.monotonic() + args.seconds

    async def worker(lane: int) -> None:
        nonlocal next_group
        # One lane owns groups lane, lane + concurrency, ...: one commit per group at once.
        mine = groups[lane :: args.concurrency]
        n = 0
        while time.monotonic() < deadline:
            group = mine[n % len(mine)]
            n += 1
            started = time.perf_counter()
            await committer.commit(request(group, topic, args.partitions, 1000 + n))
            concurrent.append((time.perf_counter() - started) * 1000)

    started = time.monotonic()
    with CpuMeter(broker=broker_pid()) as concurrent_meter:
        await asyncio.gather(*(worker(lane) for lane in range(min(args.concurrency, len(groups)))))
    elapsed = time.monotonic() - started
    connections[-1] = broker_connections(port)
    await committer.close()

    raw_p50, raw_p99, _ = percentiles(raw)
    seq_p50, seq_p99, _ = percentiles(sequential)
    con_p50, con_p99, _ = percentiles(concurrent)
    table.add(
        "raw aiokafka consumer, one at a time", len(raw), len(raw) / (sum(raw) / 1000),
        raw_p50, raw_p99, 1.0, meter=raw_meter,
    )  # fmt: skip
    table.add(
        "committer, one at a time", len(sequential), len(sequential) / (sum(sequential) / 1000),
        seq_p50, seq_p99, seq_p50 / raw_p50, meter=sequential_meter,
    )  # fmt: skip
    table.add(
        f"committer, {args.concurrency} in flight", len(concurrent), len(concurrent) / elapsed,
        con_p50, con_p99, con_p50 / raw_p50, meter=concurrent_meter,
    )  # fmt: skip
    table.print()
    print(
        "broker connections after 10 / 100 / "
        f"{args.groups} groups / the concurrent run: {connections[10]} / {connections[100]} / "
        f"{connections[args.groups]} / {connections[-1]}; "
        f"with a consumer per group, after 100 groups: {per_group}"
    )


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
