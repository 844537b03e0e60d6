"""The benchmarks as one tool.

    python -m bench                       # the scenarios, what each measures, what it needs
    python -m bench SCENARIO [ARGS...]    # run one (ARGS: its own, see SCENARIO --help)
    python -m bench --quick SCENARIO      # a small form of it: that it runs, not figures
    make bench                            # the list; make bench SCENARIO=... ARGS="..."

A scenario that needs a broker gets a brand-new one (KRaft, single node, in an empty
folder, on a free port: ``harness.kafka_broker``) unless ``--bootstrap`` is given; the
service, the bare baseline and the load generators come from ``bench.bench_support``.
Every scenario prints its figures side by side in one run by ``bench.figures``: tables
whose every row carries the CPU seconds of each process (service, broker, load
generator, Spark, this process) measured with it, and ratios. The results page of the
manual (docs/benchmarks/index.md) says what each figure is, and when and where it was
last measured.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@dataclass(frozen=True)
class Scenario:
    measures: str
    broker: bool = False  # takes --bootstrap: started here when not given
    own_broker: bool = False  # starts a broker of its own (one it slows down, or sizes)
    needs: str = ""  # what else it uses (made by `make jars tools`)
    # Its small form (``--quick``): a minute or two, to show that it still runs end to end
    # (tests/e2e/test_bench_scenarios.py runs every one); its figures mean nothing.
    quick: tuple[str, ...] = ()


SCENARIOS: dict[str, Scenario] = {
    # Events: the hot path
    "http_throughput": Scenario(
        "events/s and latency of the durable hot path against a bare FastAPI endpoint (wrk)",
        broker=True,
        needs="wrk",
        quick=("--rounds", "1", "--seconds", "3", "--queries", "100"),
    ),
    "commit_interval": Scenario(
        "a commit interval against committing every checkpoint, both against the bare endpoint",
        broker=True,
        needs="wrk",
        quick=("--queries", "100", "--rounds", "1", "--seconds", "3", "--rate", "200"),
    ),
    "lever_ab": Scenario(
        "the hot path from an earlier commit's tree and this one, side by side",
        broker=True,
        needs="wrk, a git worktree of the earlier commit",
        quick=(".", "--rounds", "1", "--seconds", "3", "--rate", "200"),
    ),
    "soak": Scenario(
        "mixed load over hundreds of queries: errors, RSS, descriptors",
        broker=True,
        quick=("--seconds", "20", "--queries", "50", "--rate", "50"),
    ),
    "memory": Scenario(
        "RSS per query at 10,000 queries x 32 partitions",
        broker=True,
        needs="go (loadgen)",
        quick=("--queries", "300", "--partitions", "8"),
    ),
    # Commits
    "commit_scale": Scenario(
        "the committer at 1,000 groups x 16 partitions",
        broker=True,
        quick=("--groups", "100", "--partitions", "4", "--seconds", "3", "--sequential", "50"),
    ),
    "coalescing": Scenario(
        "commits slower than the checkpoint interval (a broker it slows down): the slot coalesces",
        own_broker=True,
        quick=("--groups", "5", "--seconds", "3"),
    ),
    "follow_latency": Scenario(
        "batch end -> committed, for the three ways of attaching a job, side by side",
        broker=True,
        needs="Spark jars, the JVM listener",
        quick=("--seconds", "5", "--rate", "200"),
    ),
    "follow_scale": Scenario(
        "the cost of following 1,000 checkpoint folders",
        broker=True,
        quick=(
            "--folders",
            "50",
            "--batches",
            "5",
            "--seconds",
            "5",
            "--active",
            "10",
            "--interval",
            "1",
        ),
    ),
    # The Spark side
    "listener_cost": Scenario(
        "the listener's cost per progress event in the driver, against PySpark's own path",
        broker=True,
        needs="Spark jars",
        quick=("--batches", "10"),
    ),
    "service_down": Scenario(
        "Spark with the service down: batch durations with and without the listener",
        broker=True,
        needs="Spark jars",
        quick=("--records", "2000"),
    ),
    "peers": Scenario(
        "a naive synchronous committer in the listener against this service",
        broker=True,
        needs="Spark jars",
        quick=("--seconds", "5", "--rate", "200"),
    ),
    # Replicas
    "replicas": Scenario(
        "CPU an event and events/s with 1, 2 and 3 replicas on PostgreSQL, and failover time",
        broker=True,
        needs="PostgreSQL, wrk, go (loadgen)",
        quick=(
            *("--rounds", "1", "--seconds", "2", "--queries", "60", "--idle-seconds", "1"),
            *("--lease", "3"),
        ),
    ),
    "child_messages": Scenario(
        "a whole fleet's memory update (what the service tells its watcher child), encoded "
        "and decoded, before/after",
        needs="git (the earlier commit's memory update)",
        quick=("--groups", "300", "--rounds", "1", "--times", "1"),
    ),
    "board_publish": Scenario(
        "a replica's watcher publishing 10,000 groups' reports to the status board, before/after",
        needs="PostgreSQL, git (the earlier commit's status board)",
        quick=("--groups", "300", "--rounds", "1", "--publishes", "1"),
    ),
    "lease_renewal": Scenario(
        "a replica's lease renewal at 10,000 groups and what a write of one group waits "
        "meanwhile, before/after",
        needs="PostgreSQL, git (the earlier commit's lease store)",
        quick=("--groups", "600", "--rounds", "1", "--renewals", "2"),
    ),
    "replica_watchers": Scenario(
        "what each replica's watcher holds (resident memory) with 3 replicas, before/after",
        broker=True,
        needs="PostgreSQL, go (loadgen), a git worktree of the earlier commit",
        quick=("--groups", "60", "--partitions", "2", "--read-interval", "1"),
    ),
    # Looking at the fleet
    "scrape_cost": Scenario(
        "/metrics at 5,000 groups, and events' latency while /metrics (and /ui) are read back "
        "to back, log ends moving or not, and the CPU with nothing to do, before/after, and "
        "shapes of the commit before (--before-variant watcher=in-process)",
        needs="go (loadgen), wrk",
        own_broker=True,
        quick=(
            *("--groups", "200", "--seconds", "2", "--scrapes", "2", "--rate", "50"),
            *("--rounds", "1", "--topics", "4", "--move-ends", "100", "--ui"),
            *("--idle-seconds", "2", "--before", "HEAD"),
        ),
    ),
    "scrape_size": Scenario(
        "one /metrics scrape at 5,000 groups: bytes a group in the text format and gzip-encoded "
        "(in-process)",
        quick=("--groups", "200", "--partitions", "4"),
    ),
    "status_rounds": Scenario(
        "the lag monitor's CPU per read at 10,000 groups (in-process)", quick=("500", "8", "2")
    ),
    "watch_cost": Scenario(
        "the lag monitor's CPU per read, the objects it leaves to the collector and memory, "
        "at 10,000 groups whose every log end moves (in-process, a process a side)",
        quick=("--groups", "300", "--partitions", "4", "--topics", "10", "--reads", "2"),
    ),
    "follow_store_cost": Scenario(
        "what the watcher pays to follow the store at 10,000 groups, against loading it all "
        "(in-process, SQLite)",
        quick=("--groups", "300", "--partitions", "4", "--changed", "30", "--steps", "2"),
    ),
    "status_page_cost": Scenario(
        "/ui and /v1/status at 5,000 groups (in-process)", quick=("--groups", "300")
    ),
    "record_time_cost": Scenario(
        "the time lag's one read per lagging partition, at 1,000 partitions",
        own_broker=True,
        quick=("--partitions", "100"),
    ),
}


def listing() -> str:
    width = max(len(name) for name in SCENARIOS)
    lines = [
        "python -m bench SCENARIO [ARGS...]   (ARGS: python -m bench SCENARIO --help)",
        "python -m bench --quick SCENARIO     (a small form: that it runs, not its figures)",
        "",
    ]
    for name, s in SCENARIOS.items():
        extra = f" [{s.needs}]" if s.needs else ""
        broker = " [broker]" if s.broker else " [its own broker]" if s.own_broker else ""
        lines.append(f"  {name:<{width}}  {s.measures}{broker}{extra}")
    return "\n".join(lines)


def run(name: str, args: list[str]) -> int:
    """Run scenario ``name`` with ``args``; its exit status (a scenario's ``main`` returns
    one, or None for 0)."""
    module = importlib.import_module(f"bench.{name}")
    given = any(a == "--bootstrap" or a.startswith("--bootstrap=") for a in args)
    helping = bool({"-h", "--help"} & set(args))
    with contextlib.ExitStack() as stack:
        if SCENARIOS[name].broker and not given and not helping:
            from harness.kafka_broker import brand_new

            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-{name}-"))
            broker = brand_new(Path(folder) / "kafka")
            stack.callback(broker.stop)
            os.environ["BENCH_KAFKA_PID"] = str(broker.pid())  # its CPU beside the figures
            args = ["--bootstrap", broker.bootstrap, *args]
        sys.argv = [f"bench {name}", *args]
        status = module.main()
    return int(status or 0)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help", "list"}:
        print(__doc__.strip().split("\n\n")[0])
        print()
        print(listing())
        return 0
    quick = argv[0] == "--quick"
    if quick:
        argv = argv[1:]
    if not argv:
        print(f"--quick needs a scenario\n\n{listing()}", file=sys.stderr)
        return 2
    name, args = argv[0], argv[1:]
    if name not in SCENARIOS:
        print(f"no scenario {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    return run(name, [*SCENARIOS[name].quick, *args] if quick else args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
