"""The benchmarks as one tool.

    python -m bench                       # the scenarios, what each measures, what it needs
    python -m bench SCENARIO [ARGS...]    # run one (ARGS: its own, see SCENARIO --help)
    make bench                            # the list; make bench SCENARIO=... ARGS="..."

A scenario that needs a broker gets a brand-new one (KRaft, single node, in an empty
folder, on a free port: ``harness.kafka_broker``) unless ``--bootstrap`` is given; the
service, the bare baseline and the load generator come from ``bench.bench_support``.
Every scenario prints its figures side by side in one run, with the CPU of each process
beside them; the results page of the manual (docs/benchmarks/index.md) says what each
figure is, and when and where it was last measured.
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
    needs: str = ""  # what else it uses (made by `make jars tools`)


SCENARIOS: dict[str, Scenario] = {
    # Events: the hot path
    "http_throughput": Scenario(
        "events/s and latency of the durable hot path against a bare FastAPI endpoint (wrk)",
        broker=True,
        needs="wrk",
    ),
    "commit_interval": Scenario(
        "a commit interval against committing every checkpoint, both against the bare endpoint",
        broker=True,
        needs="wrk",
    ),
    "lever_ab": Scenario(
        "the hot path from an earlier commit's tree and this one, side by side",
        broker=True,
        needs="wrk, a git worktree of the earlier commit",
    ),
    "soak": Scenario("mixed load over hundreds of queries: errors, RSS, descriptors", broker=True),
    "memory": Scenario(
        "RSS per query at 10,000 queries x 32 partitions", broker=True, needs="go (loadgen)"
    ),
    # Commits
    "commit_scale": Scenario("the committer at 1,000 groups x 16 partitions", broker=True),
    "coalescing": Scenario(
        "commits slower than the checkpoint interval: the slot coalesces (its own slow broker)"
    ),
    "commit_latency": Scenario(
        "Spark batch end -> offsets committed in Kafka", broker=True, needs="Spark jars"
    ),
    "follow_latency": Scenario(
        "batch end -> committed, for the three ways of attaching a job, side by side",
        broker=True,
        needs="Spark jars, the JVM listener",
    ),
    "follow_scale": Scenario("the cost of following 1,000 checkpoint folders", broker=True),
    # The Spark side
    "listener_cost": Scenario(
        "the listener's cost per progress event in the driver, against PySpark's own path",
        broker=True,
        needs="Spark jars",
    ),
    "service_down": Scenario(
        "Spark with the service down: batch durations with and without the listener",
        broker=True,
        needs="Spark jars",
    ),
    "peers": Scenario(
        "a naive synchronous committer in the listener against this service",
        broker=True,
        needs="Spark jars",
    ),
    # Replicas
    "replicas": Scenario(
        "events/s with 1, 2 and 3 replicas on PostgreSQL, and failover time",
        broker=True,
        needs="PostgreSQL, go (loadgen)",
    ),
    "replicas_cpu": Scenario(
        "CPU per event with 1, 2 and 3 replicas on PostgreSQL", broker=True, needs="PostgreSQL, wrk"
    ),
    # Looking at the fleet
    "scrape_cost": Scenario(
        "/metrics at 5,000 groups, and events' latency while scraped back to back, before/after",
        needs="go (loadgen), wrk (its own broker)",
    ),
    "status_rounds": Scenario("the lag monitor's CPU per read at 10,000 groups (in-process)"),
    "status_page_cost": Scenario("/ui and /v1/status at 5,000 groups (in-process)"),
    "record_time_cost": Scenario(
        "the time lag's one read per lagging partition, at 1,000 partitions (its own broker)"
    ),
}


def listing() -> str:
    width = max(len(name) for name in SCENARIOS)
    lines = ["python -m bench SCENARIO [ARGS...]   (ARGS: python -m bench SCENARIO --help)", ""]
    for name, s in SCENARIOS.items():
        extra = f" [{s.needs}]" if s.needs else ""
        broker = " [broker]" if s.broker else ""
        lines.append(f"  {name:<{width}}  {s.measures}{broker}{extra}")
    return "\n".join(lines)


def run(name: str, args: list[str]) -> None:
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
        module.main()


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help", "list"}:
        print(__doc__.strip().split("\n\n")[0])
        print()
        print(listing())
        return 0
    name, args = argv[0], argv[1:]
    if name not in SCENARIOS:
        print(f"no scenario {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    run(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
