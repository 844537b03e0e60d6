"""What one change to the hot path is worth: the service from two source trees, side by
side in one run (issue 18's "each lever measured alone").

    git worktree add /tmp/before <commit before the change>
    .venv/bin/python -m bench lever_ab /tmp/before --rounds 2 --seconds 10

``BEFORE`` is any checkout's folder: a worktree (edited or not), this checkout (``.``), or
a release's source as the tests cache it
(``~/.cache/spark-offset-sidecar/releases/<version>-<commit>/source``).

The same load as ``http_throughput.py`` (``wrk`` with ``bench/wrk/progress.lua``: 500
queries x 8 partitions, every request a new batch of its query), on two services started
the same way (SQLite ``synchronous=FULL``, the real broker), one from ``BEFORE``'s
``service/`` folder and one from this checkout: in each round a closed loop (``-t2
-c32``) and a fixed rate (``--rate`` events/s, 16 connections) on each, the two
alternating so that both see the same noise. CPU per event is the server's (and its
event loop's, the main thread) from /proc, beside wrk's own CPU; the medians at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar, create_topic
from bench.figures import Table, ratio
from bench.http_throughput import COLUMNS, SIDES, cells, run_wrk
from harness.machine import ROOT

MODES = {"closed": {"connections": 32, "rate": 0}, "rate": {"connections": 16}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", type=Path, help="a checkout of the earlier commit")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument(
        "--set", action="append", default=[], metavar="SETTING=VALUE",
        help="a setting of both services, as SIDECAR_<SETTING> (min_commit_interval_seconds=1:"
        " commit_interval's durable side); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--before-set", action="append", default=[], metavar="SETTING=VALUE",
        help="a setting of BEFORE's side only (BEFORE this checkout: what one setting is "
        "worth, e.g. log_level=INFO); repeatable",
    )  # fmt: skip
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.set)
    before_settings = settings | dict(item.split("=", 1) for item in args.before_set)
    if not (args.before / "service" / "spark_offset_sidecar").is_dir():
        parser.error(f"{args.before} has no service/spark_offset_sidecar: not a checkout")

    topic = f"bench-ab-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(args.bootstrap, topic, 8))
    services = {"before": Sidecar(args.bootstrap, source=args.before, **before_settings)}
    services["after"] = Sidecar(args.bootstrap, source=ROOT, **settings)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    table = Table(
        f"before: {args.before} {' '.join(args.before_set)}, after: this checkout",
        *COLUMNS, cpu=SIDES,
    )  # fmt: skip
    try:
        for round_ in range(args.rounds):
            for mode, load in MODES.items():
                for name, service in services.items():
                    result, meter = run_wrk(
                        service.url, service.process.pid, seconds=args.seconds, topic=topic,
                        queries=500, partitions=8, run=f"{name[0]}{mode[0]}{round_}-"
                        f"{uuid.uuid4().hex[:4]}", connections=load["connections"],
                        rate=load.get("rate", args.rate),
                    )  # fmt: skip
                    results.setdefault((name, mode), []).append(result)
                    table.add(*cells(name, mode, result), meter=meter)
    finally:
        for service in services.values():
            service.stop()
    table.print()
    for mode in MODES:
        for key, what in (("events_per_s", "events/s"), ("cpu_ms_per_event", "CPU ms/event"),
                          ("loop_ms_per_event", "main thread CPU ms/event")):  # fmt: skip
            before, after = (
                statistics.median(r[key] for r in results[(name, mode)]) for name in services
            )
            ratio(f"{mode}: {what} (medians), after / before", after, before)


if __name__ == "__main__":
    main()
