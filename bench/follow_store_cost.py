"""What a watcher pays to follow the store (``runtime.store_follower``), against loading
the whole store again, side by side in one run (issue 47).

    .venv/bin/python -m bench follow_store_cost --groups 10000 --partitions 32 --changed 1000

A SQLite database (the default store) holding GROUPS queries and groups of PARTITIONS
partitions each, every group committed once and holding a newer completed checkpoint (its
slot): the rows a fleet at rest has. Then, ``--steps`` times: CHANGED groups commit or
complete a checkpoint (written as the service writes them: ``SqlStore.persist``), and the
follower takes one step (read every mark, read again what changed, refresh the ledger),
against ``SqlStore.load()`` of everything, which a watcher without marks would need. CPU
is this process's (``time.process_time``: the database's work is in it, SQLite runs in
the process), wall time beside it; a step with nothing changed too. At 200 events a
second and one step per 5 s lag read, a step meets about 1,000 changed groups.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.figures import CpuMeter, Table, ratio, rss_kib


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """(CPU s, wall s) of ``work()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    from spark_offset_sidecar.adapters.sql.store import SqlStore
    from spark_offset_sidecar.core.ledger.rules import Ledger
    from spark_offset_sidecar.core.offsets import TopicPartition
    from spark_offset_sidecar.runtime.store_follower import StoreFollower

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--changed", type=int, default=1_000, help="groups changed per step")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    if not 0 < args.changed <= args.groups:
        parser.error(f"--changed {args.changed}: between 1 and --groups")

    with tempfile.TemporaryDirectory(prefix="follow-store-") as folder:
        url = f"sqlite:///{folder}/sidecar.db"
        writer, reader = SqlStore(url), SqlStore(url)
        writer.migrate()
        taker = Ledger()
        now = [1_000.0]
        tps = [TopicPartition(f"topic-{t:03}", p) for t in range(100) for p in range(32)]

        def offsets(g: int, batch: int) -> dict[TopicPartition, int]:
            return {tps[(g + p) % len(tps)]: 1_000 * batch + p for p in range(args.partitions)}

        def progress(g: int, batch: int) -> None:
            now[0] += 0.001
            decision = taker.decide_progress(
                f"q{g}", f"group-{g:05}", "run", batch, offsets(g, batch), now[0]
            )
            writer.persist(decision.changes)
            taker.apply(decision)

        def commit(g: int) -> None:
            request = taker.take(f"group-{g:05}", now[0])
            if request is not None:
                result = taker.commit_result(request, now[0])
                writer.persist((result,))
                taker.apply_change(result)

        print(f"writing {args.groups:,} groups x {args.partitions} partitions ...", flush=True)
        setup = CpuMeter().start()  # the fleet written, its first step and a still one
        for g in range(args.groups):
            progress(g, 1)
            commit(g)
            progress(g, 2)
        follower = StoreFollower(reader, Ledger(), interval=5.0)
        first_cpu, first_wall = timed(lambda: asyncio.run(follower.step()))
        still_cpu, still_wall = timed(lambda: asyncio.run(follower.step()))
        setup.stop()
        steps: list[tuple[float, float]] = []
        loads: list[tuple[float, float]] = []
        batch = 3
        meter = CpuMeter().start()  # the steps' windows, the writes between them included
        for step in range(args.steps):
            for i in range(args.changed):
                g = (step * args.changed + i) % args.groups
                commit(g)
                progress(g, batch)
            batch += 1
            before = follower.reread
            steps.append(timed(lambda: asyncio.run(follower.step())))
            assert follower.reread - before == 2 * args.changed, "each changed group and query"
            loads.append(timed(reader.load))
        held = {
            g.group_id: g.slot and g.slot.checkpoint_id for g in follower.ledger.groups.values()
        }
        stored = {g.group_id: g.slot and g.slot.checkpoint_id for g in reader.load().groups}
        assert held == stored, "the follower holds what the store holds"
        meter.stop()
        rss = rss_kib(os.getpid()) / 1024
        writer.close()
        reader.close()

    table = Table(
        f"Following the store: {args.groups:,} groups x {args.partitions} partitions, "
        f"{args.changed:,} changed per step, SQLite, {args.steps} steps (median)",
        "what", "CPU s", "wall s",
    )  # fmt: skip
    # The last columns: this process's CPU over each row's window: the fleet's writing
    # for the first two rows, the changes' writing for the last two.
    cpu = statistics.median(c for c, _ in steps)
    load_cpu = statistics.median(c for c, _ in loads)
    table.add(
        "the follower's first step (every row)", f"{first_cpu:.3f}", f"{first_wall:.3f}",
        meter=setup,
    )  # fmt: skip
    table.add(
        "a step, nothing changed (marks only)", f"{still_cpu:.3f}", f"{still_wall:.3f}",
        meter=setup,
    )  # fmt: skip
    table.add(
        f"a step, {args.changed:,} groups changed", f"{cpu:.3f}",
        f"{statistics.median(w for _, w in steps):.3f}", meter=meter,
    )  # fmt: skip
    table.add(
        "load() of every row (no marks)", f"{load_cpu:.3f}",
        f"{statistics.median(w for _, w in loads):.3f}", meter=meter,
    )  # fmt: skip
    table.print()
    print(f"process RSS at the end: {rss:.0f} MiB")
    ratio(f"CPU, a step of {args.changed:,} changed / load() of every row", cpu, load_cpu)
    ratio("CPU, a step with nothing changed / load() of every row", still_cpu, load_cpu)


if __name__ == "__main__":
    main()
