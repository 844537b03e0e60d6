"""The cost of following many checkpoint folders: CPU of the service and storage requests
per poll, with every folder idle, then with some of them completing batches.

``--folders`` checkpoint folders (``metadata``, ``--batches`` batches of ``offsets/N`` and
``commits/N`` each, written the way Spark writes them), each followed into a group of its
own, on a local disk or on a real S3-compatible server (moto's server mode, its own
process). The service (SQLite, the real broker) reads them all first; then, for
``--seconds`` each, two phases: idle, and ``--active`` folders a second completing one
batch each (written by this process). Requests and polls come from the service's own
counters (``/metrics``); beside them, by ``bench.figures``, the CPU of the service, the
storage server, the broker and this process (the writer).

    .venv/bin/python -m bench follow_scale --storage local --folders 1000
    .venv/bin/python -m bench follow_scale --storage s3 --folders 1000 --batches 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar, create_topic
from bench.figures import CpuMeter, Table, broker_pid
from harness.s3_server import S3Server
from tests.support.checkpoints import COMMIT_LOG as COMMIT
from tests.support.checkpoints import offset_log
from tests.support.kafka import produce
from tests.support.service import metric_sum


def offsets(topic: str, batch: int) -> str:
    return offset_log(f'{{"{topic}":{{"0":{batch}}}}}', f'{{"logOffset":{batch}}}')


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--storage", choices=("local", "s3"), default="local")
    parser.add_argument("--folders", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--active", type=int, default=100, help="folders a second with a batch")
    args = parser.parse_args()

    topic = f"bench-scale-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(args.bootstrap, topic, 1))
    asyncio.run(produce(args.bootstrap, topic, args.batches + int(args.seconds) + 10))
    server = S3Server().start() if args.storage == "s3" else None
    local = Path(tempfile.mkdtemp(prefix="follow-scale-"))
    write: Callable[[str, str], None]
    if server is not None:
        client = server.client()
        client.create_bucket(Bucket="checkpoints")
        root = "s3://checkpoints"

        def write(key: str, text: str) -> None:
            client.put_object(Bucket="checkpoints", Key=key, Body=text.encode())

        settings = {"checkpoint_storage_options": json.dumps(server.storage_options())}
    else:
        root = str(local)

        def write(key: str, text: str) -> None:
            path = local / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

        settings = {}
    started = time.monotonic()
    for folder in range(args.folders):
        write(f"job-{folder}/metadata", json.dumps({"id": f"query-{folder}"}))
        for batch in range(args.batches):
            write(f"job-{folder}/offsets/{batch}", offsets(topic, batch))
            write(f"job-{folder}/commits/{batch}", COMMIT)
    took = time.monotonic() - started
    print(f"wrote {args.folders} folders x {args.batches} batches in {took:.0f} s")

    sidecar = Sidecar(args.bootstrap, follow_interval_seconds=args.interval, **settings)
    for folder in range(args.folders):
        sidecar.post(
            "/v1/followed-folders", {"path": f"{root}/job-{folder}", "group_id": f"g-{folder}"}
        )
    started = time.monotonic()
    while True:
        folders = sidecar.get("/v1/followed-folders")
        assert isinstance(folders, list)
        caught_up = sum(f["last_batch_recorded"] == args.batches - 1 for f in folders)
        if caught_up == args.folders:
            break
        if time.monotonic() - started > 600:
            raise RuntimeError(f"only {caught_up} of {args.folders} folders read after 600 s")
        time.sleep(1)
    print(f"every folder read and recorded in {time.monotonic() - started:.0f} s")

    def counters() -> tuple[float, float]:
        with urllib.request.urlopen(sidecar.url + "/metrics", timeout=30) as answer:
            text = answer.read().decode()
        return (
            metric_sum(text, "sidecar_checkpoint_storage_requests_total"),
            metric_sum(text, "sidecar_followed_folder_polls_total"),
        )

    table = Table(
        f"{args.folders} folders on {args.storage}, polled every {args.interval:g} s; "
        f"{args.seconds:g} s a phase",
        "phase", "service CPU % of a core", "service CPU ms/poll", "requests/poll", "polls",
        cpu=("service", "storage", "broker", "bench"),
    )  # fmt: skip
    storage = server.process.pid if server is not None and server.process else None
    next_batch = dict.fromkeys(range(args.folders), args.batches)
    for phase, active in (("idle", 0), (f"{args.active} folders/s active", args.active)):
        before, started = counters(), time.monotonic()
        with CpuMeter(service=sidecar.process.pid, storage=storage, broker=broker_pid()) as meter:
            while (elapsed := time.monotonic() - started) < args.seconds:
                for folder in random.sample(range(args.folders), active):
                    batch = next_batch[folder]
                    write(f"job-{folder}/offsets/{batch}", offsets(topic, batch))
                    write(f"job-{folder}/commits/{batch}", COMMIT)
                    next_batch[folder] = batch + 1
                time.sleep(max(0.0, 1 - (time.monotonic() - started - elapsed)))
        after = counters()
        seconds = time.monotonic() - started
        requests, polls = (after[i] - before[i] for i in range(2))
        cpu = meter.seconds("service") or 0.0
        table.add(
            phase, f"{100 * cpu / seconds:.1f}", f"{1000 * cpu / max(polls, 1):.3f}",
            requests / max(polls, 1), round(polls), meter=meter,
        )  # fmt: skip
    table.print()
    sidecar.stop()
    if server is not None:
        server.stop()
    shutil.rmtree(local, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
