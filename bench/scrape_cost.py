"""The cost of looking at a fleet: ``/metrics`` at thousands of groups, before and after,
side by side in one run (issue 38, part 4).

A brand-new broker; for each side (``--before REV``: that commit's ``service/`` from a
``git worktree``; ``after``: this checkout) the service on SQLite, ``--groups`` queries of
``--partitions`` partitions each loaded with two progress events (``bench/loadgen``, Go),
then, once every group is committed and the lag monitor has read its log ends:

  - one scrape at a time, ``--scrapes`` times, 1.5 s apart (each a fresh build, not
    the cached one): its size, series and time;
  - events at ``--rate``/s (loadgen, open loop: latency counted from the scheduled time,
    so a stall is not hidden) for ``--seconds``, alone, then while ``wrk -c2`` scrapes
    back to back (two Prometheus replicas that never pause): p50, p99 and max, and each
    side's CPU (service, broker, loadgen, wrk, this process) beside every figure;
    ``--rounds`` such pairs of windows, the ratios on the medians of their p99s (a p99
    moves by ~20 ms from run to run on a shared 2-core machine).

    .venv/bin/python -m bench scrape_cost --groups 5000 --before 22c559b
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import Sidecar, build_loadgen, create_topic, load
from bench.figures import CpuMeter, Table, children_cpu, ratio
from harness.kafka_broker import brand_new
from harness.machine import ROOT


def scrape(url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(url + "/metrics", timeout=120) as answer:
        body = answer.read()
    return time.perf_counter() - started, body


def series(body: bytes) -> int:
    return sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))


def gc_longest(text: str) -> str:
    """The service's longest collection of generations 1 and 2 since it started, in ms
    (``n/a`` for a service without ``sidecar_gc_pause_longest_seconds``)."""
    found = dict(
        re.findall(r'^sidecar_gc_pause_longest_seconds\{generation="(\d)"\} (\S+)', text, re.M)
    )
    if not found:
        return "n/a"
    return " / ".join(f"{float(found[g]) * 1000:.0f}" for g in ("1", "2"))


def wait_loaded(url: str, groups: int, deadline: float) -> None:
    """Every group committed, and a read of the log ends after the last commit."""
    while time.monotonic() < deadline:
        _, body = scrape(url)
        text = body.decode()
        committed = len(
            re.findall(r"^sidecar_last_successful_commit_timestamp_seconds\{", text, re.M)
        )
        read = re.search(r"^sidecar_log_end_read_timestamp_seconds (\S+)", text, re.M)
        newest = max(
            (
                float(v)
                for v in re.findall(
                    r"^sidecar_last_successful_commit_timestamp_seconds\{[^}]*\} (\S+)", text, re.M
                )
            ),
            default=0.0,
        )
        if committed >= groups and read and float(read.group(1)) > newest:
            return
        time.sleep(1)
    raise SystemExit(f"{url}: not every group committed and read in time")


def wrk_in_background(url: str, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            "wrk",
            "-t1",
            "-c2",
            "-H",
            "Accept-Encoding: gzip",
            f"-d{int(seconds) + 2}s",
            "--timeout",
            "60s",
            url + "/metrics",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def events(
    sidecar: Sidecar, broker: int, args: argparse.Namespace, first_batch: int, *, scraping: bool
) -> tuple[dict[str, Any], CpuMeter]:
    """Events at ``--rate``/s, with ``wrk -c2`` scraping back to back when ``scraping``,
    under a ``CpuMeter`` of the service, the broker, loadgen, wrk and this process."""
    with CpuMeter(service=sidecar.process.pid, broker=broker) as meter:
        scraper = wrk_in_background(sidecar.url, args.seconds) if scraping else None
        if scraper is not None:
            time.sleep(1)  # the scrapes are under way before the first event
        result = load(
            sidecar.url,
            argparse.Namespace(queries=args.groups, partitions=args.partitions, workers=32),
            first_batch,
            allow_errors=True,
            rate=args.rate,
            seconds=args.seconds,
        )
        meter.add("loadgen", result["loadgen_cpu_s"])
        result["scrapes"] = 0
        if scraper is not None:
            before = children_cpu()
            out, _ = scraper.communicate(timeout=120)
            meter.add("wrk", children_cpu() - before)
            found = re.search(r"(\d+) requests in", out)
            result["scrapes"] = int(found.group(1)) if found else 0
    return result, meter


def _failed(result: dict[str, Any]) -> str:
    failed = result["errors"] + result["non_2xx"]
    return f"{failed} of {result['sent']}"


def side(
    name: str, source: Path | None, bootstrap: str, broker: int, args: argparse.Namespace,
    tables: tuple[Table, Table],
) -> dict[str, float]:  # fmt: skip
    """One side's figures into ``tables`` (scrapes, events); the ones the ratios use."""
    sidecar = Sidecar(bootstrap, source, lag_read_interval_seconds=5)
    try:
        load(
            sidecar.url,
            argparse.Namespace(queries=args.groups, partitions=args.partitions, workers=32),
            0,
            **{"per-query": 2, "seconds": 600},
        )
        wait_loaded(sidecar.url, args.groups, time.monotonic() + 600)
        times, size, count = [], 0, 0
        with CpuMeter(service=sidecar.process.pid, broker=broker) as meter:
            for _ in range(args.scrapes):
                time.sleep(1.5)  # past the default SIDECAR_METRICS_MAX_AGE_SECONDS: fresh
                took, body = scrape(sidecar.url)
                times.append(took)
                size, count = len(body), series(body)
        figures = {"size": float(size), "scrape_p50": statistics.median(times)}
        tables[0].add(
            name, f"{size / 1e6:.2f} MB", count, f"{statistics.median(times):.3f}",
            f"{max(times):.3f}", meter=meter,
        )  # fmt: skip
        p99s: dict[bool, list[float]] = {False: [], True: []}
        window = args.rate * args.seconds  # events (batches) in one window
        for round_ in range(args.rounds):  # the two kinds of window alternate
            for scraping in (False, True):
                first = 2 + window * (2 * round_ + int(scraping))
                result, meter = events(sidecar, broker, args, first, scraping=scraping)
                tables[1].add(
                    name, round_ + 1, "back to back" if scraping else "none", result["scrapes"],
                    f"{result['p50_ms']:.1f}", f"{result['p99_ms']:.1f}",
                    f"{result['max_ms']:.1f}", _failed(result),
                    gc_longest(scrape(sidecar.url)[1].decode()), meter=meter,
                )  # fmt: skip
                p99s[scraping].append(result["p99_ms"])
        figures["quiet_p99"] = statistics.median(p99s[False])  # medians of the rounds
        figures["busy_p99"] = statistics.median(p99s[True])
        return figures
    finally:
        sidecar.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--scrapes", type=int, default=5)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="windows of each kind per side, alternating; the ratios take their medians",
    )  # fmt: skip
    parser.add_argument("--before", help="a commit to compare with (git worktree)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: at least one round is needed")
    build_loadgen()
    shape = f"{args.groups:,} groups x {args.partitions} partitions, default settings"
    tables = (
        Table(
            f"Scrapes, one at a time ({args.scrapes}, each a fresh build); {shape}",
            "side", "size", "series", "p50 s", "max s",
            cpu=("service", "broker", "bench"),
        ),
        Table(
            f"Events at {args.rate}/s for {args.seconds} s, open loop; {shape}",
            "side", "round", "scrapes", "answered", "event p50 ms", "p99 ms", "max ms", "failed",
            "longest GC gen 1 / 2 ms so far",
            cpu=("service", "broker", "loadgen", "wrk", "bench"),
        ),
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="scrape-cost-") as folder:
        broker = brand_new(Path(folder) / "kafka")
        try:
            asyncio.run(create_topic(broker.bootstrap, "bench", args.partitions))
            sides = []
            if args.before:
                tree = Path(folder) / "before"
                subprocess.run(
                    ["git", "worktree", "add", "--detach", str(tree), args.before],
                    cwd=ROOT,
                    check=True,
                    capture_output=True,
                )
                try:
                    sides.append(
                        side(f"before ({args.before})", tree, broker.bootstrap, broker.pid(),
                             args, tables)
                    )  # fmt: skip
                finally:
                    subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
            sides.append(side("after", None, broker.bootstrap, broker.pid(), args, tables))
        finally:
            broker.stop()
    for table in tables:
        table.print()
    after = sides[-1]
    if args.rounds > 1:
        print(f"(p99s below: medians of {args.rounds} rounds a side)")
    ratio("after: event p99, scrapes back to back / none", after["busy_p99"], after["quiet_p99"])
    if len(sides) == 2:
        before = sides[0]
        ratio("scrape size, after / before", after["size"], before["size"])
        ratio("scrape time p50, after / before", after["scrape_p50"], before["scrape_p50"])
        ratio("event p99 under scrapes, after / before", after["busy_p99"], before["busy_p99"])


if __name__ == "__main__":
    main()
