"""A replica's watcher publishing its groups' reports to the status board: an earlier
commit's ``SqlStatusBoard`` (``--before REV``, its ``adapters/sql/status_board.py`` read
from git) against this checkout's, alternating, on one real PostgreSQL.

``--groups`` groups owned by one replica, each report as a group of ``--partitions``
partitions with lag figures makes it, and a status window of ten samples; each round a
side publishes them all ``--publishes`` times. This process's CPU (where the watcher
encodes and sends the reports) and the wall time of a publish, with PostgreSQL's CPU
beside them.

    .venv/bin/python -m bench board_publish --groups 10000 --before HEAD~1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from array import array
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine

from bench.bench_support import module_at
from bench.figures import CpuMeter, Table, median_ratios
from bench.lease_renewal import fill, group_id
from harness.postgres_server import PostgresServer
from spark_offset_sidecar.adapters.sql import migrate, status_board
from spark_offset_sidecar.adapters.sql.lease_store import LeaseStore
from spark_offset_sidecar.core.lag.figures import (
    CatchUp,
    CatchUpState,
    DataStatus,
    GroupLag,
    JobRates,
    PartitionLag,
)
from spark_offset_sidecar.core.lag.report import GroupReport, LiveCommits
from spark_offset_sidecar.core.lag.status import (
    GroupSample,
    GroupStatus,
    PartitionStatus,
    Status,
    StoredWindow,
)
from spark_offset_sidecar.core.ledger.state import GroupCounters
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.ports.status_board import BoardEntry

MODULE = "service/spark_offset_sidecar/adapters/sql/status_board.py"
TOPIC = "bench-7"


def board_entry(index: int, partitions: int, at: float) -> BoardEntry:
    tps = tuple(TopicPartition(TOPIC, p) for p in range(partitions))
    status = GroupStatus(
        group_id=group_id(index), query_id=f"q{index}", status=Status.OK, complete=1.0,
        total_lag=50 * partitions, consecutive_failures=0, last_commit_at=at - 2,
        partitions=tuple(
            PartitionStatus(TOPIC, p, Status.OK, 123_456 + p, 123_506 + p, 50, 10)
            for p in range(partitions)
        ),
    )  # fmt: skip
    lag = GroupLag(
        partitions=tuple(
            PartitionLag(TOPIC, p, 50, 0, 4.5, 4.5, 11.1, 0, 9_000, 3_600.0)
            for p in range(partitions)
        ),
        data_status=DataStatus.OK,
        lost_total=0,
        catch_up=CatchUp(CatchUpState.CAUGHT_UP, None, 11.1, 11.1, JobRates(at, 11.1, 11.1, 800)),
        trend=tuple((at - 60 * i, 50 * partitions) for i in range(10)),
    )
    live = LiveCommits(None, None, None, GroupCounters(succeeded=40, events=Counter(a=40)))
    window = StoredWindow(
        tuple(
            GroupSample(
                at - 5 * i, tps, array("q", [123_456 + p for p in range(partitions)]),
                array("q", [50] * partitions),
            )
            for i in range(10)
        ),
        lagging_since=None,
    )  # fmt: skip
    return BoardEntry(GroupReport(status, live, 0, at, at - 1, "r0", (), lag), window)


def one_side(
    module: ModuleType, engine: Any, entries: list[BoardEntry], times: int
) -> dict[str, float]:
    board = module.SqlStatusBoard(engine, "r0")
    walls, cpus = [], []
    for _ in range(times):
        wall, cpu = time.perf_counter(), time.process_time()
        written = board.publish(entries)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
        if written != len(entries):
            raise SystemExit(f"a publish wrote {written} of {len(entries)} reports")
    return {"cpu_s": statistics.median(cpus), "wall_s": statistics.median(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--publishes", type=int, default=3, help="publishes a round and side")
    parser.add_argument("--before", default="HEAD", help="the commit to compare with")
    args = parser.parse_args()
    table = Table(
        f"Publishing {args.groups:,} groups' reports ({args.partitions} partitions each), "
        f"{args.publishes} publishes a round",
        "side", "round", "publish CPU s (median)", "publish wall s (median)",
        cpu=("postgres", "bench"),
    )  # fmt: skip
    figures: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    server = PostgresServer().start()
    try:
        server.reset()
        engine = create_engine(server.url, pool_size=2)
        migrate.upgrade(engine)
        fill(engine, args.groups, args.partitions)
        LeaseStore(engine, "r0", 3600.0).renew()
        entries = [board_entry(i, args.partitions, time.time()) for i in range(args.groups)]
        with tempfile.TemporaryDirectory(prefix="board-publish-") as folder:
            sides = {"before": module_at(args.before, MODULE, Path(folder)), "after": status_board}
            for round_ in range(1, args.rounds + 1):
                for name, module in sides.items():
                    with CpuMeter(postgres=server.pid()) as meter:
                        found = one_side(module, engine, entries, args.publishes)
                    figures[name].append(found)
                    table.add(
                        f"before ({args.before})" if name == "before" else name, round_,
                        f"{found['cpu_s']:.3f}", f"{found['wall_s']:.3f}", meter=meter,
                    )  # fmt: skip
        engine.dispose()
    finally:
        server.stop()
    table.print()
    median_ratios(
        args.rounds,
        figures,
        (("cpu_s", "the watcher's CPU a publish"), ("wall_s", "a publish's time")),
    )


if __name__ == "__main__":
    main()
