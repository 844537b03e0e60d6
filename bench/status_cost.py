"""Cost of the Burrow-style status (``core.group_status``) at scale, in-process: a full
window of commits for N groups of P partitions, then one evaluation of every group, with
every partition lagging (the worst case: each one builds its series) and caught up (the
usual case: rule P1 answers at once). The lag monitor does this once per read of the log
ends, yielding to the event loop every 100 groups.

    .venv/bin/python -m bench.status_cost [GROUPS] [PARTITIONS]
"""

from __future__ import annotations

import sys
import time

from spark_offset_sidecar.core.group_status import CommitWindows
from spark_offset_sidecar.core.ledger_state import CommittedOffsets, GroupState
from spark_offset_sidecar.core.offsets import TopicPartition

WINDOW = 10


def run(groups: int, partitions: int, lagging: bool) -> tuple[float, float]:
    windows = CommitWindows(WINDOW, stop_after=600)
    last = 100 * (WINDOW - 1)
    ends = {
        TopicPartition(f"t{g}", p): last + (100 if lagging else 0)
        for g in range(groups)
        for p in range(partitions)
    }
    states: list[GroupState] = []
    observe = 0.0
    for step in range(WINDOW):
        states = [
            GroupState(
                f"g{g}",
                query_id=f"q{g}",
                committed=CommittedOffsets(
                    f"q{g}",
                    step,
                    {TopicPartition(f"t{g}", p): 100 * step for p in range(partitions)},
                    float(step),
                ),
            )
            for g in range(groups)
        ]
        started = time.perf_counter()
        windows.observe(states, ends, float(step))
        observe = time.perf_counter() - started
    started = time.perf_counter()
    for state in states:
        windows.evaluate(state, ends, float(WINDOW), err_after=3)
    return observe, time.perf_counter() - started


def main() -> None:
    groups = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    lag_observe, lag_eval = run(groups, partitions, lagging=True)
    ok_observe, ok_eval = run(groups, partitions, lagging=False)
    print(f"{groups} groups x {partitions} partitions, window {WINDOW}")
    print(f"  every partition lagging: observe {lag_observe:.2f} s, evaluate {lag_eval:.2f} s")
    print(f"  every partition caught up: observe {ok_observe:.2f} s, evaluate {ok_eval:.2f} s")
    print(f"  lagging / caught up evaluation: {lag_eval / ok_eval:.1f}x")
    per = lag_eval / (groups * partitions) * 1e6
    print(f"  {per:.1f} us per lagging partition")


if __name__ == "__main__":
    main()
