"""How every scenario prints its figures: a markdown table (``Table``) whose every row
carries the CPU seconds each side spent while that row was measured (``CpuMeter``), and
the share of the machine other tenants took (steal). On two cores a busy load generator
or broker flatters the slower side, so no figure is printed without them.

Sides are processes by name: ``service``, ``bare``, ``broker``, ``wrk``, ``loadgen``...
and always ``bench``, this process itself (its threads, and the processes it started that
have no name of their own, e.g. Spark's JVM). A load generator run to its end by
``run_child`` is measured exactly (``getrusage`` of waited children) and ``add``-ed.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.machine import ROOT
from harness.processes import children_by_parent, stat_fields

TICKS = os.sysconf("SC_CLK_TCK")
BENCH = "bench"


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its waited-for children, from /proc."""
    return sum(int(f) for f in stat_fields(f"/proc/{pid}/stat")[11:15]) / TICKS


def main_thread_cpu(pid: int) -> float:
    """User + system CPU of ``pid``'s main thread alone (the service's event loop: HTTP,
    Kafka commits, the ledger's decisions); the rest of the process's is its threads' (the
    store's)."""
    return sum(int(f) for f in stat_fields(f"/proc/{pid}/task/{pid}/stat")[11:13]) / TICKS


def rss_kib(pid: int) -> int:
    """A process's resident memory now (``VmRSS`` of /proc ``status``), in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))


def broker_pid() -> int | None:
    """The broker's pid: ``python -m bench``'s brand-new one (``BENCH_KAFKA_PID``), or
    ``scripts/local-kafka.sh``'s pid file; None for a broker elsewhere (``--bootstrap``)."""
    given = os.environ.get("BENCH_KAFKA_PID")
    if given and Path(f"/proc/{given}").exists():
        return int(given)
    folder = ROOT / os.environ.get("LOCAL_KAFKA_DIR", ".local/kafka")  # relative: to ROOT
    with contextlib.suppress(FileNotFoundError, ValueError):
        pid = int((folder / "kafka.pid").read_text())
        if Path(f"/proc/{pid}").exists():
            return pid
    return None


def _machine_ticks() -> tuple[int, int]:
    """(steal, all) ticks of the machine since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]]
    return fields[7], sum(fields)


def _tree(root: int, children: Mapping[int, list[int]], skip: set[int]) -> list[int]:
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        if pid in skip and pid != root:
            continue
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def descendants(root: int) -> list[int]:
    """``root`` and every live process below it."""
    return _tree(root, children_by_parent(), set())


class CpuMeter:
    """CPU seconds of named processes between ``__enter__`` and ``__exit__``, each with its
    live descendants, and this process as ``bench``.

    A side may be several processes (replicas), counted together. A side given as None
    is not measurable here (a broker given by ``--bootstrap``): its cell reads ``-``. A
    process that ends inside the window is not counted: stop what is measured after the
    meter has ended."""

    def __init__(self, **sides: int | Sequence[int] | None) -> None:
        self._pids: dict[str, list[int] | None] = {
            name: None if pids is None else [pids] if isinstance(pids, int) else list(pids)
            for name, pids in sides.items()
        }
        self._start: dict[str, dict[int, float]] = {}
        self._seconds: dict[str, float | None] = {}
        self._steal_start = (0, 0)
        self.steal_pct = 0.0

    def __enter__(self) -> CpuMeter:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> CpuMeter:
        self._start = self._read()
        self._steal_start = _machine_ticks()
        return self

    def stop(self) -> None:
        end = self._read()
        steal, ticks = _machine_ticks()
        self.steal_pct = 100 * (steal - self._steal_start[0]) / max(1, ticks - self._steal_start[1])
        for name, pids in self._pids.items():
            self._seconds[name] = None if pids is None else self._spent(name, end)
        self._seconds[BENCH] = self._spent(BENCH, end)

    def track(self, name: str, pid: int) -> None:
        """A side started inside the window: all it spends until the end counts."""
        self._pids[name] = [*(self._pids.get(name) or []), pid]
        self._start.setdefault(name, {})

    def add(self, name: str, seconds: float) -> None:
        """A side measured on its own (a load generator by ``run_child``)."""
        self._seconds[name] = (self._seconds.get(name) or 0.0) + seconds

    def seconds(self, name: str) -> float | None:
        return self._seconds.get(name)

    def _spent(self, name: str, end: Mapping[str, Mapping[int, float]]) -> float:
        """What the side's processes alive at the end spent in the window (one started
        inside it: all it spent)."""
        start = self._start[name]
        return sum(seconds - start.get(pid, 0.0) for pid, seconds in end[name].items())

    def _read(self) -> dict[str, dict[int, float]]:
        """Each side's processes and their CPU so far; ``bench``: this process's own threads
        (its reaped children are counted by ``run_child``) and its unnamed descendants."""
        children = children_by_parent()
        roots = {pid for pids in self._pids.values() for pid in pids or ()}
        readings: dict[str, dict[int, float]] = {}
        for name, pids in self._pids.items():
            if pids is not None:
                readings[name] = _cpu_of([p for pid in pids for p in _tree(pid, children, roots)])
        own = resource.getrusage(resource.RUSAGE_SELF)
        readings[BENCH] = _cpu_of(_tree(os.getpid(), children, roots)[1:])
        readings[BENCH][os.getpid()] = own.ru_utime + own.ru_stime
        return readings


def _cpu_of(pids: Sequence[int]) -> dict[int, float]:
    found = {}
    for pid in pids:
        with contextlib.suppress(OSError):  # exited between the listing and now
            found[pid] = cpu_seconds(pid)
    return found


def run_child(
    command: Sequence[str], **options: Any
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``command`` to its end (``subprocess.run``, text mode, check); what it did and the
    CPU seconds it used, exactly (this process's waited-for children before and after)."""
    before = children_cpu()
    done = subprocess.run(command, check=True, text=True, **options)
    return done, children_cpu() - before


def run_children(
    commands: Sequence[Sequence[str]], environments: Sequence[Mapping[str, str]]
) -> tuple[list[str], float]:
    """Run ``commands`` at once, each with its environment, to their ends; their outputs
    and the CPU seconds they used together, exactly as ``run_child``."""
    before = children_cpu()
    running = [
        subprocess.Popen(list(c), env=dict(e), stdout=subprocess.PIPE, text=True)
        for c, e in zip(commands, environments, strict=True)
    ]
    outputs = [p.communicate()[0] for p in running]
    used = children_cpu() - before
    for command, process in zip(commands, running, strict=True):
        if process.returncode:
            raise subprocess.CalledProcessError(process.returncode, list(command))
    return outputs, used


def children_cpu() -> float:
    """CPU seconds of this process's children that have been waited for, so far: around
    a wait, what the waited-for process used."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cell(value: object) -> str:
    """A figure as printed: None as ``-``, floats to two places (or as a whole number from
    1,000), integers with thousands separators."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.2f}"
    return str(value)


class Table:
    """A markdown table of figures, each row with the CPU seconds of the sides ``cpu``
    names (and steal %) from the ``CpuMeter`` it was measured under.

    Rows go to standard error as they come (a long run shows its progress); ``print``
    writes the whole table to standard output at the end, under its title, ready to paste
    into the results page.
    """

    def __init__(self, title: str, *columns: str, cpu: Sequence[str] = (BENCH,)) -> None:
        self.title = title
        self.cpu = list(cpu)
        self.columns = [*columns, *(f"{side} CPU s" for side in self.cpu), "steal %"]
        self.rows: list[list[str]] = []

    def add(self, *cells: object, meter: CpuMeter) -> None:
        if len(cells) + len(self.cpu) + 1 != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {self.columns}")
        row = [cell(c) for c in cells]
        row += [cell(meter.seconds(side)) for side in self.cpu]
        row.append(f"{meter.steal_pct:.0f}")
        self.rows.append(row)
        print(_line(row), file=sys.stderr, flush=True)

    def __str__(self) -> str:
        lines = [f"{self.title}", "", _line(self.columns), _line(["---"] * len(self.columns))]
        lines += [_line(row) for row in self.rows]
        return "\n".join(lines)

    def print(self) -> None:
        print(f"\n{self}\n", flush=True)


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def ratio(what: str, after: float, before: float) -> None:
    """Print one side-by-side ratio (after / before) under the tables; none where
    ``before`` is 0 (e.g. less CPU than the clock's tick in a short window)."""
    shown = f"{after / before:.2f}x" if before else "no ratio: before is 0"
    print(f"{what}: {_figure(after)} / {_figure(before)} = {shown}", flush=True)


def median_ratios(
    rounds: int, figures: dict[str, list[dict[str, float]]], named: Sequence[tuple[str, str]]
) -> None:
    """Under the tables: for each (key, what) of ``named``, the ratio of the medians over
    the rounds, ``figures["after"]`` against ``figures["before"]``."""
    print(f"(medians of {rounds} rounds a side)")
    for key, what in named:
        ratio(
            f"{what}, after / before",
            statistics.median(f[key] for f in figures["after"]),
            statistics.median(f[key] for f in figures["before"]),
        )


def _figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def histogram(text: str, name: str) -> dict[float, float]:
    """A Prometheus histogram's cumulative bucket counts (``le`` -> count) in a scrape's
    text; empty when the service does not export ``name``."""
    found: dict[float, float] = {}
    for le, count in re.findall(rf'^{re.escape(name)}_bucket\{{le="([^"]+)"\}} (\S+)', text, re.M):
        found[float(le)] = float(count)
    return found


def quantile_bound(before: Mapping[float, float], after: Mapping[float, float], q: float) -> str:
    """The bucket bound (ms) under which ``q`` of what was observed between two scrapes of
    a histogram falls: "<= 25" ("> 2500" past the last bound; "-" with nothing observed or
    no such histogram). ``q=1``: the bucket of the largest."""
    if not after:
        return "-"
    total = after[math.inf] - before.get(math.inf, 0.0)
    if total <= 0:
        return "-"
    for le in sorted(after):
        if after[le] - before.get(le, 0.0) >= q * total:
            if le == math.inf:
                return f"> {max(b for b in after if b != math.inf) * 1000:g}"
            return f"<= {le * 1000:g}"
    return "-"


def window_figures(before: Mapping[float, float], after: Mapping[float, float]) -> str:
    """A histogram of seconds over a window between two scrapes: its p99 and largest, in
    ms, and how many it observed ("<= 10 / <= 500 ms of 399")."""
    total = after.get(math.inf, 0.0) - before.get(math.inf, 0.0)
    if total <= 0:
        return "-"
    p99, largest = quantile_bound(before, after, 0.99), quantile_bound(before, after, 1.0)
    return f"{p99} / {largest} ms of {total:.0f}"
