"""A watcher's memory update of a whole fleet (``ports.watcher.MemoryUpdate``: what the
service tells its watcher child when the child starts), encoded and decoded by an earlier
commit's ``adapters/watcher/memory_update.py`` (``--before REV``, read from git) and by
this checkout's, alternating, in this process.

``--groups`` groups, each with its counters, its job's rates and its last commit of
``--partitions`` partitions (over 100 topics, as the scrape benchmarks' fleet); a side
encodes and decodes it ``--times`` times a round. The encoding runs off the service's
event loop (a thread), the decoding on the watcher's. Both sides must read back what was
sent.

    .venv/bin/python -m bench child_messages --groups 10000 --partitions 32 --before 47b7daf
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_support import module_at
from bench.figures import CpuMeter, Table, median_ratios
from spark_offset_sidecar.adapters.watcher import memory_update
from spark_offset_sidecar.core.lag.figures import JobRates
from spark_offset_sidecar.core.lag.group_memory import GroupMemory
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupCounters
from spark_offset_sidecar.core.offsets import shared_partition
from spark_offset_sidecar.ports.watcher import MemoryUpdate

MODULE = "service/spark_offset_sidecar/adapters/watcher/memory_update.py"


def fleet(groups: int, partitions: int) -> MemoryUpdate:
    memories: dict[str, GroupMemory | None] = {}
    for g in range(groups):
        offsets = {
            shared_partition(f"topic-{g % 100}", p): 1_000_000 + p for p in range(partitions)
        }
        memories[f"group-{g}"] = GroupMemory(
            0, 0.0, None, GroupCounters(succeeded=40, events=Counter(accepted=40)), None, None,
            JobRates(1.0, 11.1, 11.1, 800), CommittedOffsets(f"q{g}", 40, offsets, 2.0),
        )  # fmt: skip
    return MemoryUpdate(memories, {}, True, (), None, None)


def one_side(module: ModuleType, update: MemoryUpdate, times: int) -> dict[str, float]:
    encodes, decodes, size = [], [], 0
    for _ in range(times):
        started = time.perf_counter()
        body = module.encode_memory_update(update)
        encodes.append(time.perf_counter() - started)
        started = time.perf_counter()
        read = module.decode_memory_update(body)
        decodes.append(time.perf_counter() - started)
        if read != update:
            raise SystemExit(f"{module.__name__} read back another update than it was sent")
        size = len(body)
    return {
        "encode_s": statistics.median(encodes),
        "decode_s": statistics.median(decodes),
        "mb": size / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--times", type=int, default=3, help="encodings a round and side")
    parser.add_argument("--before", default="HEAD", help="the commit to compare with")
    args = parser.parse_args()
    table = Table(
        f"A memory update of {args.groups:,} groups ({args.partitions} partitions each), "
        f"{args.times} a round",
        "side", "round", "encode s (median)", "decode s (median)", "MB",
        cpu=("bench",),
    )  # fmt: skip
    update = fleet(args.groups, args.partitions)
    figures: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="child-messages-") as folder:
        sides = {"before": module_at(args.before, MODULE, Path(folder)), "after": memory_update}
        for round_ in range(1, args.rounds + 1):
            for name, module in sides.items():
                with CpuMeter() as meter:
                    found = one_side(module, update, args.times)
                figures[name].append(found)
                table.add(
                    f"before ({args.before})" if name == "before" else name, round_,
                    f"{found['encode_s']:.3f}", f"{found['decode_s']:.3f}", f"{found['mb']:.1f}",
                    meter=meter,
                )  # fmt: skip
    table.print()
    median_ratios(
        args.rounds,
        figures,
        (("encode_s", "encoding a whole fleet"), ("decode_s", "decoding it"), ("mb", "its size")),
    )


if __name__ == "__main__":
    main()
