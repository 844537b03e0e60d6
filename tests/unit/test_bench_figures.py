"""bench/figures.py: how every benchmark prints a figure with the CPU of each side.

The CPU checks burn a set amount of CPU time (not of wall time) in real processes, so
they hold on a slow or busy machine: only lower bounds and which side it lands on."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from bench.figures import (
    BENCH,
    CpuMeter,
    Table,
    cell,
    histogram,
    quantile_bound,
    ratio,
    rss_kib,
    run_child,
    window_figures,
)

BURN = "import sys, time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def _burning(seconds: float) -> subprocess.Popen[str]:
    """A process that burns ``seconds`` of CPU, says so, and waits to be killed."""
    code = BURN.format(s=seconds) + "print('burnt', flush=True)\ntime.sleep(120)\n"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def test_a_sides_cpu_is_its_own_and_not_the_benchs(children: list[subprocess.Popen[str]]) -> None:
    with CpuMeter() as meter:
        service = _burning(0.5)
        children.append(service)
        meter.track("service", service.pid)  # started inside the window: all of it counts
        assert service.stdout is not None
        assert service.stdout.readline() == "burnt\n"
    service_cpu = meter.seconds("service")
    bench_cpu = meter.seconds(BENCH)
    assert service_cpu is not None
    assert service_cpu >= 0.45
    assert bench_cpu is not None
    assert bench_cpu < service_cpu


def test_an_unnamed_child_is_the_benchs_and_a_reaped_one_is_counted_by_run_child(
    children: list[subprocess.Popen[str]],
) -> None:
    with CpuMeter() as meter:
        spark = _burning(0.4)  # e.g. Spark's JVM: started by this process, not named
        children.append(spark)
        assert spark.stdout is not None
        assert spark.stdout.readline() == "burnt\n"
        _, loadgen = run_child([sys.executable, "-c", BURN.format(s=0.3)])
    meter.add("loadgen", loadgen)
    assert loadgen >= 0.25
    assert (meter.seconds(BENCH) or 0.0) >= 0.35
    assert meter.seconds("loadgen") == loadgen


def test_a_side_that_cannot_be_measured_reads_as_a_dash() -> None:
    with CpuMeter(broker=None) as meter:
        pass
    table = Table("t", "what", cpu=("broker", BENCH))
    table.add("x", meter=meter)
    row = str(table).splitlines()[-1]
    assert row.startswith("| x | - | ")
    assert str(table).splitlines()[2] == "| what | broker CPU s | bench CPU s | steal % |"


def test_a_row_of_the_wrong_width_names_its_table() -> None:
    table = Table("scrapes at 5,000 groups", "side", "size")
    with CpuMeter() as meter:
        pass
    with pytest.raises(ValueError, match="scrapes at 5,000 groups"):
        table.add("after", meter=meter)


def test_figures_are_printed_alike() -> None:
    assert [cell(None), cell(12345), cell(0.123), cell(1234.5), cell("7 / 9")] == [
        "-",
        "12,345",
        "0.12",
        "1,234",
        "7 / 9",
    ]


def test_a_ratio_over_zero_says_so_instead_of_failing(capsys: pytest.CaptureFixture[str]) -> None:
    ratio("idle cores, after / before", 0.015, 0.0)  # no CPU tick in a short window
    ratio("idle cores, after / before", 0.3, 0.2)
    assert capsys.readouterr().out.splitlines() == [
        "idle cores, after / before: 0.015 / 0 = no ratio: before is 0",
        "idle cores, after / before: 0.3 / 0.2 = 1.50x",
    ]


def test_a_process_resident_memory_grows_by_what_it_touches(
    children: list[subprocess.Popen[str]],
) -> None:
    code = (
        "import sys\nprint('ready', flush=True)\nsys.stdin.readline()\n"
        "block = b'x' * (64 << 20)\nprint('held', flush=True)\nsys.stdin.readline()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    children.append(process)
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"  # started: what follows is the block
    before = rss_kib(process.pid)
    process.stdin.write("go\n")
    process.stdin.flush()
    assert process.stdout.readline() == "held\n"
    grown = rss_kib(process.pid) - before
    assert 60 * 1024 <= grown <= 80 * 1024, grown  # 64 MiB written


def test_a_quantile_of_a_window_is_read_from_two_scrapes_of_a_histogram() -> None:
    def text(counts: list[int]) -> str:
        bounds = ["0.01", "0.05", "0.25", "+Inf"]
        return "\n".join(f'x_bucket{{le="{b}"}} {c}.0' for b, c in zip(bounds, counts, strict=True))

    before, after = (
        histogram(text([90, 95, 100, 100]), "x"),
        histogram(text([90, 95, 199, 200]), "x"),
    )
    assert quantile_bound(before, after, 0.5) == "<= 250"  # 99 of the 100 new
    assert quantile_bound(before, after, 1.0) == "> 250"
    assert window_figures(before, after) == "<= 250 / > 250 ms of 100"
    assert window_figures(after, after) == "-"  # nothing observed in between
    assert window_figures({}, histogram("", "x")) == "-"  # not exported
