"""What one ``/metrics`` scrape weighs at fleet scale, in the text format and on the wire
with gzip (as Prometheus always asks for it), in-process: the metrics page's budget.

N groups of P partitions of one topic, each committed twice by its query, every one
lagging with a time lag and falling behind (the log ends move between the two commits and
after, so the lag monitor's history of them places the records not yet processed; a
record it cannot place, two reads too far apart on a busy machine, has its timestamp
read), in-memory Kafka, the real app
in this process with every series one process exports (``serve`` splits them between
the service and its watcher, and the service's answer is both). Prints the series, the
bytes of the text format and of its gzip encoding, each a group.

    .venv/bin/python -m bench scrape_size --groups 5000 --partitions 8
    .venv/bin/python -m bench scrape_size --groups 10000 --partitions 32
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import CpuMeter, Table
from spark_offset_sidecar.app.parts import on_sql
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.settings import (
    DatabaseSettings,
    MetricsSettings,
    Settings,
    StatusSettings,
)
from spark_offset_sidecar.testing import InMemoryLogEnds, InMemoryRecordTimes, MemoryKafka
from tests.support.watcher import loop_watcher

TOPIC = "bench"
READ_INTERVAL = 2.0  # seconds between the lag monitor's reads of the log ends
MOVES = 5  # reads that see the log ends move before the second commits
LEVELS = 40  # offsets a partition's groups commit at the second time: as many time lags
TIMEOUT = 900.0  # seconds for every group to have its time lag
# The series of a lagging group that its evaluation (the lag monitor's read) makes.
EVALUATED = (
    b"sidecar_consumergroup_status",
    b"sidecar_consumergroup_data_status",
    b"sidecar_consumergroup_lag",
    b"sidecar_consumergroup_lag_seconds",
    b"sidecar_consumergroup_messages_lost_total",
)
# A group catching up has its estimate too: one series more (docs/operate/metrics.md).
CATCHING_UP = b"sidecar_consumergroup_catchup_seconds"


@dataclass(frozen=True)
class Scrape:
    groups: int
    series: int
    text_bytes: int  # the text format
    gzip_bytes: int  # what goes over the wire when the scraper accepts gzip


def progress(group: int, batch: int, offsets: dict[TopicPartition, int]) -> dict[str, Any]:
    return {
        "id": f"bench-query-{group}",
        "runId": "r",
        "batchId": batch,
        "sources": [{"endOffset": {TOPIC: {str(tp.partition): o for tp, o in offsets.items()}}}],
    }


async def measure(groups: int, partitions: int, granularity: str = "topic") -> Scrape:
    """One scrape of ``groups`` lagging groups of ``partitions`` partitions each."""
    with tempfile.TemporaryDirectory(prefix="scrape-size-") as folder:
        settings = Settings(
            database=DatabaseSettings(url=f"sqlite:///{folder}/s.db"),
            status=StatusSettings(lag_read_interval_seconds=READ_INTERVAL),
            metrics=MetricsSettings(granularity=granularity, max_age_seconds=0),
        )
        rng = random.Random(groups)
        start = {
            TopicPartition(TOPIC, p): 1_000_000 + rng.randrange(100_000) for p in range(partitions)
        }
        ends = InMemoryLogEnds(dict(start))
        times = InMemoryRecordTimes()
        kafka = MemoryKafka(log_ends=ends, record_times=times)
        parts = on_sql(settings, kafka, loop_watcher(kafka))
        app = create_app(settings, parts)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://s", timeout=600) as client,
        ):

            async def post(group: int, batch: int, offsets: dict[TopicPartition, int]) -> None:
                body = {
                    "group_id": f"bench-group-{group}",
                    "progress": progress(group, batch, offsets),
                }
                answer = await client.post("/v1/progress", json=body)
                assert answer.status_code == 200, answer.text

            def move_ends() -> None:
                for tp in ends.ends:
                    ends.ends[tp] += 20_000 + rng.randrange(5_000)
                    times.stamp(tp, ends.ends[tp] - 1, time.time())

            for group in range(groups):
                await post(group, 0, start)
            for _ in range(MOVES if groups else 0):  # the monitor sees the log ends move
                move_ends()
                await asyncio.sleep(READ_INTERVAL * 1.1)
            # A record the history cannot place costs a read of its timestamp (one a
            # partition a read): a few offsets a partition, in every combination.
            levels = {
                tp: sorted(rng.sample(range(o, ends.ends[tp]), LEVELS if groups else 0))
                for tp, o in start.items()
            }
            for group in range(groups):
                await post(group, 1, {tp: rng.choice(at) for tp, at in levels.items()})
            deadline = time.monotonic() + TIMEOUT
            # One build in which every group has its status and time lag and none is
            # catching up (that group's estimate, one series more, comes and goes with
            # how the reads fell around the second commit): the log ends move on, so
            # every group falls behind.
            while True:
                async with client.stream(
                    "GET", "/metrics", headers={"Accept-Encoding": "gzip"}
                ) as answer:
                    assert answer.headers.get("content-encoding") == "gzip"
                    wire = b"".join([chunk async for chunk in answer.aiter_raw()])
                text = gzip.decompress(wire)
                if (
                    all(text.count(b"\n" + name + b"{") >= groups for name in EVALUATED)
                    and b"\n" + CATCHING_UP + b"{" not in text
                ):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"not every group fell behind in {TIMEOUT:.0f} s")
                move_ends()
                await asyncio.sleep(READ_INTERVAL)
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    return Scrape(groups, series, len(text), len(wire))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--granularity", default="topic", choices=["group", "topic", "partition"])
    args = parser.parse_args()
    table = Table(
        f"one /metrics scrape, {args.groups:,} groups x {args.partitions} partitions, every one "
        f"lagging and falling behind, SIDECAR_METRICS_GRANULARITY={args.granularity} (the app "
        "in this process: its CPU is the bench side)",
        "groups", "series", "text MB", "text bytes a group", "gzip KB", "gzip bytes a group",
    )  # fmt: skip
    for groups in (0, args.groups):  # what any scrape has, then the fleet's
        with CpuMeter() as meter:
            scrape = asyncio.run(measure(groups, args.partitions, args.granularity))
        table.add(
            f"{groups:,}", f"{scrape.series:,}", f"{scrape.text_bytes / 1e6:.2f}",
            f"{scrape.text_bytes / max(groups, 1):.0f}", f"{scrape.gzip_bytes / 1e3:.0f}",
            f"{scrape.gzip_bytes / max(groups, 1):.0f}", meter=meter,
        )  # fmt: skip
    table.print()


if __name__ == "__main__":
    main()
