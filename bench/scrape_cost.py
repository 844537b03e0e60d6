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
    back to back (two Prometheus replicas that never pause), then (``--ui``) while
    ``/ui`` is read back to back too (``wrk -c1``): p50, p99 and max, and each side's CPU
    (service, broker, loadgen, wrk, this process) beside every figure, and what events
    waited on meanwhile, from the service's histograms read before and after the window:
    the p99 and largest of its event loop's lag (``sidecar_event_loop_lag_seconds``: the
    loop held; one hold of 500 ms in 20 s is the p99 of the events, not of 400 ticks) and
    of its database writes (``sidecar_store_write_duration_seconds``); ``--rounds`` such
    sets of windows, the ratios on the medians of their p99s (a p99 moves by ~20 ms from
    run to run on a shared 2-core machine);
  - (``--idle-seconds``) the service's CPU with no event and no reader (once loaded and
    the broker settled, before the scrapes), its watcher's and writer's shares, and its
    resident memory after the scrapes.

Each side is ``offset-sidecar serve`` as it runs by default (with its children: every
reader reads its one port; CPU and memory count its children). ``--before-variant
SETTING=VALUE[,SETTING=VALUE]`` adds a side of ``--before``'s commit with those settings
(a shape that commit had and this one dropped: ``watcher=in-process``); repeatable.
``--replicated``: every side is one replica on a PostgreSQL of its own (emptied before
each side), whose reports go to the status board and readers read from it.

Both sides start once the broker has settled (below a quarter of a core: a brand-new
broker creating thousands of partitions is busy for minutes).

The groups read ``--topics`` topics in turn; ``--move-ends R`` appends R records a second
to their partitions in turn from the start (a thread of this process: its CPU is the
bench's), so that every read of the log ends finds them moved and every group lagging
(each group's offsets stay below 100 when groups outnumber a window's events).

    .venv/bin/python -m bench scrape_cost --groups 5000 --before 22c559b
    .venv/bin/python -m bench scrape_cost --groups 10000 --partitions 32 --topics 100 \\
        --move-ends 3200 --ui --idle-seconds 30 --before main
    .venv/bin/python -m bench scrape_cost ... --before bfec187 --before-variant watcher=in-process
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import LogEndMover, Sidecar, build_loadgen, create_topic, load, worktree
from bench.figures import (
    CpuMeter,
    Table,
    children_cpu,
    cpu_seconds,
    descendants,
    histogram,
    ratio,
    rss_kib,
    window_figures,
)
from harness.kafka_broker import brand_new
from harness.postgres_server import PostgresServer
from harness.processes import children_running


def scrape(url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(url + "/metrics", timeout=120) as answer:
        body = answer.read()
    return time.perf_counter() - started, body


def series(body: bytes) -> int:
    return sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))


def _by_generation(name: str, text: str) -> dict[str, float]:
    found = re.findall(rf'^{name}\{{generation="(\d)"\}} (\S+)', text, re.M)
    return {generation: float(value) for generation, value in found}


def gc_longest(text: str) -> str:
    """The service's longest collection of generations 1 and 2 since it started, in ms
    (``n/a`` for a service without ``sidecar_gc_pause_longest_seconds``)."""
    found = _by_generation("sidecar_gc_pause_longest_seconds", text)
    if not found:
        return "n/a"
    return " / ".join(f"{found[g] * 1000:.0f}" for g in ("1", "2"))


def gc_spent(start: str, end: str) -> str:
    """The time the service stood in collections of each generation between the scrapes
    ``start`` and ``end``, in ms (``n/a`` without ``sidecar_gc_pause_seconds``)."""
    before = _by_generation("sidecar_gc_pause_seconds_total", start)
    after = _by_generation("sidecar_gc_pause_seconds_total", end)
    if not after:
        return "n/a"
    return " / ".join(f"{(after[g] - before.get(g, 0.0)) * 1000:.0f}" for g in ("0", "1", "2"))


# What the events waited on in a window, from the service's histograms (read before and
# after it): the event loop held (a tick woken late) and the database's writes.
HELD = ("sidecar_event_loop_lag_seconds", "sidecar_store_write_duration_seconds")


def held(start: str, end: str) -> list[str]:
    """The p99 and largest of each of ``HELD`` over the window between the scrapes
    ``start`` and ``end`` (``-`` for a service without it)."""
    return [window_figures(histogram(start, n), histogram(end, n)) for n in HELD]


def wait_loaded(url: str, groups: int, deadline: float) -> None:
    """Every group committed, a read of the log ends after the last commit, and every
    group evaluated (its status exported)."""
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
        evaluated = len(re.findall(r"^sidecar_consumergroup_status\{", text, re.M))
        if committed >= groups and evaluated >= groups and read and float(read.group(1)) > newest:
            return
        time.sleep(1)
    raise SystemExit(f"{url}: not every group committed and read in time")


# The readers of each kind of window: (path, wrk connections) read back to back.
READERS = {
    "none": (),
    "/metrics": (("/metrics", 2),),  # two Prometheus replicas that never pause
    "/metrics + /ui": (("/metrics", 2), ("/ui", 1)),  # and a person who never stops
}


def wrk_in_background(url: str, connections: int, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            "-H",
            "Accept-Encoding: gzip",
            f"-d{int(seconds) + 2}s",
            "--timeout",
            "60s",
            url,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def load_extra(args: argparse.Namespace) -> dict[str, Any]:
    """loadgen's options for the groups' topics."""
    return {"topics": args.topics} if args.topics > 1 else {}


class Product:
    """The service as ``serve`` runs it: one port, its children counted with it."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.taker = sidecar
        self.pids = [sidecar.process.pid]

    def readers(self, path: str) -> list[str]:
        return [self.taker.url + path]

    def rss_mib(self) -> float:
        """Resident memory of the service and its children."""
        tree = {pid for root in self.pids for pid in descendants(root)}
        return sum(rss_kib(pid) for pid in tree) / 1024

    def stop(self) -> None:
        self.taker.stop()


def events(
    product: Product, broker: int, args: argparse.Namespace, first_batch: int, window: str
) -> tuple[dict[str, Any], CpuMeter]:
    """Events at ``--rate``/s while the ``window``'s readers read back to back, under a
    ``CpuMeter`` of the service, the broker, loadgen, wrk and this process."""
    with CpuMeter(service=product.pids, broker=broker, postgres=_postgres(args)) as meter:
        readers = [
            (url, wrk_in_background(url, connections, args.seconds))
            for path, connections in READERS[window]
            for url in product.readers(path)
        ]
        if readers:
            time.sleep(1)  # the reads are under way before the first event
        result = load(
            product.taker.url,
            argparse.Namespace(queries=args.groups, partitions=args.partitions, workers=32),
            first_batch,
            allow_errors=True,
            rate=args.rate,
            seconds=args.seconds,
            **load_extra(args),
        )
        meter.add("loadgen", result["loadgen_cpu_s"])
        result["reads"] = {}
        before = children_cpu()
        for url, reader in readers:
            out, _ = reader.communicate(timeout=120)
            found = re.search(r"(\d+) requests in", out)
            result["reads"][url] = int(found.group(1)) if found else 0
        if readers:
            meter.add("wrk", children_cpu() - before)
    return result, meter


def idle_cores(
    product: Product, broker: int, seconds: float, args: argparse.Namespace
) -> tuple[float, dict[str, float | None], CpuMeter]:
    """The service's CPU over ``seconds`` with no event and no reader, in cores, and its
    children's shares of it (None: a service without that child)."""
    children = {
        name: [pid for root in product.pids for pid in children_running(root, name)] or None
        for name in ("watcher", "writer")
    }
    with (
        CpuMeter(service=product.pids, broker=broker, postgres=_postgres(args)) as meter,
        CpuMeter(**children) as shares,
    ):
        time.sleep(seconds)
    spent = {name: shares.seconds(name) for name in children}
    return (
        (meter.seconds("service") or 0.0) / seconds,
        {name: None if cpu is None else cpu / seconds for name, cpu in spent.items()},
        meter,
    )


def _postgres(args: argparse.Namespace) -> int | None:
    """The replicas' PostgreSQL (its backends are the postmaster's children): "-" without."""
    return None if args.postgres is None else int(args.postgres.pid())


def settle(broker: int, cores: float = 0.25, seconds: float = 5.0, limit: float = 300.0) -> None:
    """Wait until the broker uses less than ``cores`` over ``seconds``: a brand-new
    broker creating thousands of partitions (and electing their leaders) is busy for
    minutes, and the first side measured would share the machine with it. So is a broker
    that has just taken the first commits of 10,000 groups (1.4-1.6 cores for about a
    minute, 2026-12-03), which only the first side loads: each side settles it again."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        before = cpu_seconds(broker)
        time.sleep(seconds)
        used = (cpu_seconds(broker) - before) / seconds
        if used < cores:
            print(f"broker settled after {time.monotonic() - started:.0f} s", flush=True)
            return
    print(f"broker still above {cores} cores after {limit:.0f} s: measuring anyway", flush=True)


def _failed(result: dict[str, Any]) -> str:
    """How many events failed, and the first failure as loadgen saw it."""
    failed = result["errors"] + result["non_2xx"]
    first = result.get("first_failure")
    return f"{failed} of {result['sent']}" + (f" (first: {first})" if first else "")


def side(
    name: str, source: Path | None, bootstrap: str, broker: int, args: argparse.Namespace,
    tables: tuple[Table, Table, Table], *, also: Sequence[str] = (),
) -> dict[str, float]:  # fmt: skip
    """One side's figures into ``tables`` (scrapes, events, idle); the ones the ratios use.
    ``also``: settings of this side alone (SETTING=VALUE)."""
    settings: dict[str, object] = {"lag_read_interval_seconds": 5}
    if source is None:  # this checkout's side, with --after-set's settings
        settings.update(dict(item.split("=", 1) for item in args.after_set))
    else:
        settings.update(dict(item.split("=", 1) for item in args.before_set))
    settings.update(dict(item.split("=", 1) for item in also))
    if args.postgres is not None:  # a replica, on an empty database
        args.postgres.reset()
        settings.update(replicated="true", database_url=args.postgres.url)
    sidecar = Sidecar(bootstrap, source, **settings)
    product = Product(sidecar)
    try:
        load(
            sidecar.url,
            argparse.Namespace(queries=args.groups, partitions=args.partitions, workers=32),
            0,
            **{"per-query": 2, "seconds": 600},
            **load_extra(args),
        )
        wait_loaded(sidecar.url, args.groups, time.monotonic() + 600)
        # Loaded, the fleet keeps the broker at about 0.2 cores (its log ends read, the
        # mover's records): above that, it is still busy with what loading asked of it.
        settle(broker, cores=0.5, limit=120.0)
        # The CPU with nothing to do measured first (no scrape's work left behind), the
        # memory after the scrapes (their buffers are the service's as scraped).
        idle = idle_cores(product, broker, args.idle_seconds, args) if args.idle_seconds else None
        times, size, count = [], 0, 0
        with CpuMeter(service=product.pids, broker=broker, postgres=_postgres(args)) as meter:
            for _ in range(args.scrapes):
                time.sleep(1.5)  # past the default SIDECAR_METRICS_MAX_AGE_SECONDS: fresh
                took, size, count = 0.0, 0, 0
                for url in product.readers("/metrics"):  # a scrape of every process
                    took_one, body = scrape(url.removesuffix("/metrics"))
                    took, size, count = max(took, took_one), size + len(body), count + series(body)
                times.append(took)
        figures = {"size": float(size), "scrape_p50": statistics.median(times)}
        if idle is not None:
            cores, shares, idle_meter = idle
            rss = product.rss_mib()
            of_which = " / ".join("-" if c is None else f"{c:.3f}" for c in shares.values())
            tables[2].add(
                name, args.idle_seconds, f"{cores:.3f}", of_which, f"{rss:.0f}", meter=idle_meter
            )
            figures["idle_cores"], figures["rss_mib"] = cores, rss
        tables[0].add(
            name, f"{size / 1e6:.2f} MB", count, f"{statistics.median(times):.3f}",
            f"{max(times):.3f}", meter=meter,
        )  # fmt: skip
        kinds = [k for k in READERS if k != "/metrics + /ui" or args.ui]
        p99s: dict[str, list[float]] = {kind: [] for kind in kinds}
        # A query's batches go up by one per event: at most this many a window each.
        per_query = -(-args.rate * args.seconds // args.groups)
        for round_ in range(args.rounds):  # the kinds of window alternate
            for index, kind in enumerate(kinds):
                first = 2 + per_query * (len(kinds) * round_ + index)
                start = scrape(product.taker.url)[1].decode()
                result, meter = events(product, broker, args, first, kind)
                end = scrape(product.taker.url)[1].decode()
                reads = " / ".join(str(n) for n in result["reads"].values()) or "-"
                tables[1].add(
                    name, round_ + 1, kind, reads,
                    f"{result['p50_ms']:.1f}", f"{result['p99_ms']:.1f}",
                    f"{result['max_ms']:.1f}", _failed(result), *held(start, end),
                    gc_spent(start, end), gc_longest(end), meter=meter,
                )  # fmt: skip
                p99s[kind].append(result["p99_ms"])
        for kind, values in p99s.items():  # medians of the rounds
            figures[f"p99 {kind}"] = statistics.median(values)
        return figures
    finally:
        product.stop()


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
    parser.add_argument(
        "--after-set",
        action="append",
        default=[],
        metavar="SETTING=VALUE",
        help="a setting of this checkout's side only, as SIDECAR_<SETTING> (a setting's worth, "
        "on one commit: --before HEAD --after-set ...); repeatable",
    )
    parser.add_argument(
        "--before-set",
        action="append",
        default=[],
        metavar="SETTING=VALUE",
        help="a setting of --before's side only, as SIDECAR_<SETTING>; repeatable",
    )
    parser.add_argument(
        "--after-first",
        action="store_true",
        help="measure this checkout before --before's commit (the second side meets a "
        "broker whose logs the first side's run has grown: run both orders)",
    )
    parser.add_argument("--topics", type=int, default=1, help="topics the groups read in turn")
    parser.add_argument(
        "--move-ends", type=float, default=0.0,
        help="records a second appended to the topics' partitions in turn (0: none)",
    )  # fmt: skip
    parser.add_argument("--ui", action="store_true", help="also a window with /ui read")
    parser.add_argument(
        "--before-variant",
        action="append",
        default=[],
        metavar="SETTING=VALUE[,SETTING=VALUE]",
        help="also a side of --before's commit with these settings (a shape it had that this "
        "checkout dropped: watcher=in-process); repeatable",
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=0.0,
        help="measure the service's CPU with no event and no reader this long (0: not)",
    )  # fmt: skip
    parser.add_argument(
        "--replicated", action="store_true",
        help="every side a replica (SIDECAR_REPLICATED=true, one) on a PostgreSQL of its own, "
        "emptied before each side: its reports published to the board, readers answered "
        "from it",
    )  # fmt: skip
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: at least one round is needed")
    if args.before_variant and not args.before:
        parser.error("--before-variant is a variant of --before's commit: give --before")
    build_loadgen()
    moving = f", log ends moving {args.move_ends:g} records/s" if args.move_ends else ""
    shape = (
        f"{args.groups:,} groups x {args.partitions} partitions over {args.topics} topic(s)"
        f"{moving}, default settings"
    )
    tables = (
        Table(
            f"Scrapes, one at a time ({args.scrapes}, each a fresh build); {shape}",
            "side", "size", "series", "p50 s", "max s",
            cpu=("service", "broker", "postgres", "bench"),
        ),
        Table(
            f"Events at {args.rate}/s for {args.seconds} s, open loop; {shape}",
            "side", "round", "read back to back", "reads answered", "event p50 ms", "p99 ms",
            "max ms", "failed", "loop late p99 / max", "db write p99 / max",
            "GC gen 0 / 1 / 2 ms in window", "longest GC gen 1 / 2 ms so far",
            cpu=("service", "broker", "postgres", "loadgen", "wrk", "bench"),
        ),
        Table(
            f"No event and no reader; {shape}",
            "side", "seconds", "service cores", "of which watcher / writer", "service RSS MiB",
            cpu=("service", "broker", "postgres", "bench"),
        ),
    )  # fmt: skip
    args.postgres = PostgresServer().start() if args.replicated else None
    with tempfile.TemporaryDirectory(prefix="scrape-cost-") as folder:
        broker = brand_new(Path(folder) / "kafka")
        mover = None
        try:
            topics = [f"bench-{i}" for i in range(args.topics)] if args.topics > 1 else ["bench"]
            for topic in topics:
                asyncio.run(create_topic(broker.bootstrap, topic, args.partitions))
            if args.move_ends:
                mover = LogEndMover(broker.bootstrap, topics, args.partitions, args.move_ends)
            settle(broker.pid())
            measured: dict[str, dict[str, float]] = {}
            order = ["before", "after"] if args.before else ["after"]
            for which in reversed(order) if args.after_first else order:
                if which == "after":
                    measured[which] = side(
                        "after", None, broker.bootstrap, broker.pid(), args, tables
                    )
                    continue
                with worktree(args.before, folder) as tree:
                    measured[which] = side(
                        f"before ({args.before})", tree, broker.bootstrap, broker.pid(), args,
                        tables,
                    )  # fmt: skip
            if args.before_variant:
                with worktree(args.before, folder) as tree:
                    for variant in args.before_variant:
                        measured[variant] = side(
                            f"before, {variant}", tree, broker.bootstrap, broker.pid(), args,
                            tables, also=variant.split(","),
                        )  # fmt: skip
        finally:
            if mover is not None:
                mover.stop()
                moved = mover.sent - mover.failed
                print(f"log ends moved by {moved:,} records ({mover.failed:,} refused)")
            broker.stop()
            if args.postgres is not None:
                args.postgres.stop()
    for table in tables[: 3 if args.idle_seconds else 2]:
        table.print()
    after = measured["after"]
    if args.rounds > 1:
        print(f"(p99s below: medians of {args.rounds} rounds a side)")
    busiest = "p99 /metrics + /ui" if args.ui else "p99 /metrics"
    ratio(f"after: event {busiest} / none", after[busiest], after["p99 none"])
    for variant in args.before_variant:
        other = measured[variant]
        for key in (k for k in after if k.startswith("p99 ")):
            ratio(f"event {key}, after / before {variant}", after[key], other[key])
        if args.idle_seconds:
            ratio(f"idle service cores, after / before {variant}", after["idle_cores"],
                  other["idle_cores"])  # fmt: skip
            ratio(f"service RSS, after / before {variant}", after["rss_mib"], other["rss_mib"])
    if "before" in measured:
        before = measured["before"]
        ratio("scrape size, after / before", after["size"], before["size"])
        ratio("scrape time p50, after / before", after["scrape_p50"], before["scrape_p50"])
        for key in (k for k in after if k.startswith("p99 ")):
            ratio(f"event {key}, after / before", after[key], before[key])
        if args.idle_seconds:
            ratio("idle service cores, after / before", after["idle_cores"], before["idle_cores"])
            ratio("service RSS, after / before", after["rss_mib"], before["rss_mib"])


if __name__ == "__main__":
    main()
