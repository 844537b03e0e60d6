"""What watching a fleet whose every log end moves costs the service's process, in-process
and side by side in one run (issue 47): the lag monitor's CPU per read, the objects the
cyclic collector then tracks, the time of one full collection over them, and the
process's resident memory.

    .venv/bin/python -m bench watch_cost --groups 10000 --partitions 32 --topics 100 \\
        --before d47b694

GROUPS groups of PARTITIONS partitions over TOPICS topics (group g reads topic g mod
TOPICS), each committed once, their offsets made as an event's are (``core.offsets.
from_json``, so that partitions are shared where the code shares them). At every read
(``--reads``, 5 s of simulated time apart) every log end has moved: every group lags and
is evaluated again, its status and lag figures rebuilt. Each side runs in a process of
its own (``--before REV``: that commit's ``service/`` from a ``git worktree``; ``after``:
this checkout), so that neither inherits the other's heap. CPU is the side's own
(``time.process_time``) for ``LagMonitor.poll`` (in-memory log ends and record times: what
Kafka costs is not in it); the collection is ``gc.collect()`` after the last read.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import worktree
from bench.figures import CpuMeter, Table, ratio, rss_kib, run_child
from harness.machine import ROOT

INTERVAL = 5.0


def measure(groups: int, partitions: int, topics: int, reads: int) -> dict[str, Any]:
    """One side's figures, in this process (whose ``service/`` is the side's)."""
    from spark_offset_sidecar.core.lag.status import CommitWindows
    from spark_offset_sidecar.core.ledger.rules import Ledger
    from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState
    from spark_offset_sidecar.core.offsets import from_json
    from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
    from spark_offset_sidecar.testing import InMemoryLogEnds, InMemoryRecordTimes

    def topic(g: int) -> str:
        return f"topic-{g % topics:03}"

    fleet = Ledger(
        groups=[
            GroupState(
                f"group-{g:05}",
                f"q{g}",
                committed=CommittedOffsets(
                    f"q{g}",
                    1,
                    from_json({topic(g): {str(p): 1_000 for p in range(partitions)}}),
                    at=1.0,
                ),
            )
            for g in range(groups)
        ]
    )
    ends = {
        tp: 2_000
        for group in fleet.groups.values()
        if group.committed is not None
        for tp in group.committed.offsets
    }
    reader = InMemoryLogEnds(dict(ends))
    now = [1_000.0]
    monitor = LagMonitor(
        lambda: fleet,
        reader,
        interval=INTERVAL,
        err_after_failures=3,
        windows=CommitWindows(10, stop_after=600),
        clock=lambda: now[0],
        record_times=InMemoryRecordTimes(),
    )
    cpu = []
    for read in range(reads):
        now[0] += INTERVAL
        reader.ends = {tp: end + 16 * (read + 1) for tp, end in ends.items()}
        started = time.process_time()
        asyncio.run(monitor.poll())
        cpu.append(time.process_time() - started)
    assert len(monitor.lags) == groups, "every group has its lag figures"
    started = time.perf_counter()
    gc.collect()
    collection = time.perf_counter() - started
    return {
        "cpu_per_read": statistics.median(cpu[1:]),  # the first read also fills histories
        "tracked": len(gc.get_objects()),
        "collection": collection,
        "rss_mib": rss_kib(os.getpid()) / 1024,
        "evaluations": monitor.evaluations,
    }


def side(source: Path | None, args: argparse.Namespace) -> tuple[dict[str, Any], CpuMeter]:
    """``measure`` in a new process with ``source``'s ``service/`` (None: this checkout's),
    and the CPU it used in all (its ``side`` column)."""
    command = [
        sys.executable, __file__, "--side", str(source or ROOT), "--groups", str(args.groups),
        "--partitions", str(args.partitions), "--topics", str(args.topics),
        "--reads", str(args.reads),
    ]  # fmt: skip
    with CpuMeter() as meter:
        done, used = run_child(command, capture_output=True)
    meter.add("side", used)
    return dict(json.loads(done.stdout.strip().splitlines()[-1])), meter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--reads", type=int, default=4)
    parser.add_argument("--before", help="a commit to compare with (git worktree)")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # a side's own process
    args = parser.parse_args()
    if args.reads < 2:
        parser.error(f"--reads {args.reads}: at least two (the first fills the histories)")
    if args.side:
        sys.path.insert(0, str(Path(args.side) / "service"))
        figures = measure(args.groups, args.partitions, args.topics, args.reads)
        print(json.dumps(figures))
        return
    sides: dict[str, tuple[dict[str, Any], CpuMeter]] = {}
    with tempfile.TemporaryDirectory(prefix="watch-cost-") as folder:
        if args.before:
            with worktree(args.before, folder) as tree:
                sides[f"before ({args.before})"] = side(tree, args)
        sides["after"] = side(None, args)
    table = Table(
        f"{args.groups:,} groups x {args.partitions} partitions over {args.topics} topics, "
        f"every log end moved at each read, {args.reads} reads (in-process, a process a side)",
        "side", "CPU s per read (median)", "objects the collector tracks",
        "one full collection ms", "RSS MiB", cpu=("side", "bench"),
    )  # fmt: skip
    for name, (f, meter) in sides.items():
        table.add(
            name, f"{f['cpu_per_read']:.2f}", f"{f['tracked']:,}",
            f"{f['collection'] * 1000:.0f}", f"{f['rss_mib']:.0f}", meter=meter,
        )  # fmt: skip
    table.print()
    if len(sides) == 2:
        before, after = sides[f"before ({args.before})"][0], sides["after"][0]
        for key, what in (
            ("cpu_per_read", "CPU per read"),
            ("tracked", "objects tracked"),
            ("collection", "full collection"),
            ("rss_mib", "RSS"),
        ):
            ratio(f"{what}, after / before", after[key], before[key])


if __name__ == "__main__":
    main()
