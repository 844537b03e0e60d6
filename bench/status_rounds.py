"""The lag monitor's CPU per read at scale, in steady state (issue 18): every group
evaluated every read (before) against only the groups whose status can have changed
(``runtime.lag_monitor``: changed inputs or a lagging partition), side by side in one run.

    .venv/bin/python -m bench status_rounds [GROUPS] [PARTITIONS] [ROUNDS]

A fleet of GROUPS groups of PARTITIONS partitions with full windows. At each read (every
10 s of simulated time), ``--active`` of the groups got records and committed them (new
log ends, a new commit), ``--stopped`` have records waiting and no commit (STOP: the
time matters), the others are idle and caught up. CPU is the process's own
(``time.process_time``) for sampling and evaluating the groups after a read (reading the
log ends from Kafka is not included: it is the same for both), per read once the windows
are full; "% of a core" at the default 10 s read interval.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import CpuMeter, Table, ratio
from spark_offset_sidecar.core.lag.status import CommitWindows
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.testing import InMemoryLogEnds

INTERVAL = 10.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("groups", type=int, nargs="?", default=10_000)
    parser.add_argument("partitions", type=int, nargs="?", default=32)
    parser.add_argument("rounds", type=int, nargs="?", default=5)
    parser.add_argument("--active", type=float, default=0.10)
    parser.add_argument("--stopped", type=float, default=0.05)
    args = parser.parse_args()
    n, p = args.groups, args.partitions
    active = range(int(n * args.active))
    stopped = range(len(active), len(active) + int(n * args.stopped))
    tps = [[TopicPartition(f"t{g}", q) for q in range(p)] for g in range(n)]
    ends = {tp: 1_000 for group in tps for tp in group}
    fleet = Ledger()
    clock = [0.0]

    def commit(g: int, at: float) -> None:
        offsets = {tp: ends[tp] for tp in tps[g]}
        fleet.groups[f"g{g}"] = GroupState(
            f"g{g}", f"q{g}", committed=CommittedOffsets(f"q{g}", int(at), offsets, at)
        )

    reader = InMemoryLogEnds(ends)
    windows = {"every group": CommitWindows(10, 600), "changed only": CommitWindows(10, 600)}
    monitor = LagMonitor(
        lambda: fleet,
        reader,
        interval=INTERVAL,
        err_after_failures=3,
        windows=windows["changed only"],
        clock=lambda: clock[0],
    )
    full = windows["every group"]
    cpu: dict[str, list[float]] = {name: [] for name in windows}
    evaluated_before = 0
    meter = CpuMeter().start()  # in this process: the one side
    for round_ in range(args.rounds + 1 + 10):  # 10 reads fill the windows first
        clock[0] += INTERVAL
        for g in range(n) if round_ == 0 else active:
            for tp in tps[g]:
                ends[tp] += 50
            commit(g, clock[0] - 1)
        for g in stopped if round_ >= 10 else ():
            for tp in tps[g]:
                ends[tp] += 50  # records arrive, nothing is committed
        reader.ends = ends
        monitor.log_ends = ends  # as a read of the log ends leaves them (its cost is Kafka's)
        started = time.process_time()
        for group in fleet.groups.values():
            full.sample(group, ends, clock[0])
        full.keep_only(fleet.groups.keys())
        statuses = {
            g.group_id: full.evaluate(g, ends, clock[0], err_after=3) for g in fleet.groups.values()
        }
        spent_full = time.process_time() - started
        started = time.process_time()
        asyncio.run(monitor.evaluate(fleet))
        spent_changed = time.process_time() - started
        assert monitor.statuses == statuses, "the kept statuses differ from evaluating all"
        if round_ > 10:
            cpu["every group"].append(spent_full)
            cpu["changed only"].append(spent_changed)
        if round_ == 10:
            evaluated_before = monitor.evaluations
    meter.stop()
    kinds = {s.status.value for s in monitor.statuses.values()}
    table = Table(
        f"{n} groups x {p} partitions; per read: {len(active)} committed, {len(stopped)} "
        f"stopped with records waiting, the rest idle; statuses seen: {sorted(kinds)}",
        "statuses evaluated", "CPU s per read (median)", "reads",
        f"% of a core at a read every {INTERVAL:g} s",
    )  # fmt: skip
    for name, values in cpu.items():
        median = statistics.median(values)
        table.add(name, f"{median:.3f}", len(values), f"{100 * median / INTERVAL:.1f}", meter=meter)
    table.print()
    per_read = (monitor.evaluations - evaluated_before) / args.rounds
    print(f"groups evaluated per read (changed only): {per_read:.0f}")
    ratio(
        "CPU per read, every group / changed only",
        statistics.median(cpu["every group"]),
        statistics.median(cpu["changed only"]),
    )


if __name__ == "__main__":
    main()
