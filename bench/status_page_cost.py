"""The status page and ``/v1/status`` at fleet scale, in-process (issue 38, part 5).

N groups of P partitions, every one lagging (the page's worst case: each has a time lag,
a catch-up estimate and a line of its last hour), in-memory log ends and record times,
the real app in one process, as the watcher (which renders them) runs: no process
tuning. Prints the time of
``GET /ui`` (first page, a filtered page, a late page) and ``GET /v1/status/<group>``,
and the longest time the event loop was held while the page rendered (a ticker
coroutine measures the gaps between its turns).

    .venv/bin/python -m bench status_page_cost --groups 5000 --partitions 8
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import CpuMeter, Table
from spark_offset_sidecar.app.parts import on_sql
from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.settings import DatabaseSettings, Settings, StatusSettings
from spark_offset_sidecar.testing import InMemoryLogEnds, InMemoryRecordTimes, MemoryKafka
from tests.support.watcher import loop_watcher


def progress(group: int, batch: int, partitions: int) -> dict[str, object]:
    offsets = {"t": {str(p): 100 * batch for p in range(partitions)}}
    return {
        "id": f"q{group}",
        "runId": "r",
        "batchId": batch,
        "sources": [{"endOffset": offsets}],
        "inputRowsPerSecond": 10.0,
        "processedRowsPerSecond": 50.0,
    }


async def measure(groups: int, partitions: int) -> None:
    ends = InMemoryLogEnds({TopicPartition("t", p): 10_000 for p in range(partitions)})
    times = InMemoryRecordTimes()
    for p in range(partitions):
        times.stamp(TopicPartition("t", p), 5_000, time.time() - 600)  # after every commit
    with tempfile.TemporaryDirectory(prefix="status-page-") as folder:
        await _measure_in(folder, ends, times, groups, partitions)


async def _measure_in(
    folder: str, ends: InMemoryLogEnds, times: InMemoryRecordTimes, groups: int, partitions: int
) -> None:
    settings = Settings(
        database=DatabaseSettings(url=f"sqlite:///{folder}/s.db"),
        status=StatusSettings(lag_read_interval_seconds=1),
    )
    kafka = MemoryKafka(log_ends=ends, record_times=times)
    app = create_app(settings, on_sql(settings, kafka, loop_watcher(kafka)))
    await _measure(app, groups, partitions)


async def _measure(app: Any, groups: int, partitions: int) -> None:
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://s") as client,
    ):
        for batch in (1, 2):
            for g in range(groups):
                body = {"group_id": f"group-{g:05}", "progress": progress(g, batch, partitions)}
                answer = await client.post("/v1/progress", json=body)
                assert answer.status_code == 200, answer.text
            await asyncio.sleep(2.5)  # two reads of the log ends between the batches
        while True:
            listed = (await client.get("/v1/status")).json()["groups"]
            if sum(1 for g in listed if g["lag_seconds"]) == groups:
                break
            await asyncio.sleep(0.5)

        async def timed(path: str, **params: str) -> tuple[float, float, int]:
            gaps: list[float] = []
            done = asyncio.Event()

            async def ticker() -> None:
                last = time.perf_counter()
                while not done.is_set():
                    await asyncio.sleep(0)
                    now = time.perf_counter()
                    gaps.append(now - last)
                    last = now

            task = asyncio.create_task(ticker())
            await asyncio.sleep(0)
            started = time.perf_counter()
            answer = await client.get(path, params=params)
            took = time.perf_counter() - started
            done.set()
            await task
            assert answer.status_code == 200
            return took, max(gaps, default=0.0), len(answer.content)

        table = Table(
            f"{groups:,} groups x {partitions} partitions, every one lagging (the app in "
            "this process: its CPU is the bench side)",
            "request", "times", "median ms", "max ms", "longest loop hold ms", "size KB",
        )  # fmt: skip
        # A group's status takes a millisecond or so: timed 50 times, so that its row's CPU
        # is more than the clock ticks (10 ms) the meter counts in.
        for name, path, params, times in [
            ("GET /ui (page 1)", "/ui", {}, 5),
            ("GET /ui?status=OK&q=group-04", "/ui", {"status": "OK", "q": "group-04"}, 5),
            ("GET /ui?page=100", "/ui", {"page": "100"}, 5),
            ("GET /v1/status/group-00042", "/v1/status/group-00042", {}, 50),
        ]:
            with CpuMeter() as meter:
                runs = [await timed(path, **params) for _ in range(times)]
            took = [r[0] * 1000 for r in runs]
            held = max(r[1] for r in runs) * 1000
            table.add(
                name, times, round(statistics.median(took)), round(max(took)), round(held),
                round(runs[0][2] / 1024), meter=meter,
            )  # fmt: skip
        table.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(measure(args.groups, args.partitions))


if __name__ == "__main__":
    main()
