"""Every benchmark still runs: ``python -m bench --quick NAME`` for each scenario, as a
user would run it (a brand-new broker from the runner, the real service, Spark, wrk,
PostgreSQL), printing its tables with the CPU of each side. Its figures are not judged
here (machines are shared and noisy): that it runs end to end and prints them is."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from bench.__main__ import SCENARIOS
from harness.machine import ROOT


def _marks(name: str) -> list[pytest.MarkDecorator]:
    scenario = SCENARIOS[name]
    marks = []
    if scenario.broker or scenario.own_broker:
        marks.append(pytest.mark.kafka)
    if "Spark" in scenario.needs:
        marks.append(pytest.mark.spark)
    return marks


def _tables(output: str) -> list[tuple[list[str], list[list[str]]]]:
    """The markdown tables ``bench.figures.Table`` printed: (header, rows) each."""
    found: list[tuple[list[str], list[list[str]]]] = []
    lines = output.splitlines()
    for index, line in enumerate(lines[:-1]):
        if line.startswith("| ") and lines[index + 1].startswith("| --- |"):
            rows = []
            for row in lines[index + 2 :]:
                if not row.startswith("| "):
                    break
                rows.append([c.strip() for c in row.strip("|").split(" | ")])
            found.append(([c.strip() for c in line.strip("|").split(" | ")], rows))
    return found


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=_marks(name)) for name in SCENARIOS]
)  # fmt: skip
def test_the_scenario_runs_and_prints_its_figures_with_each_sides_cpu(name: str) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "BENCH_KAFKA_PID"}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", name],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    tables = _tables(done.stdout)
    assert tables, f"{name} printed no table:\n{done.stdout[-3000:]}"
    for header, rows in tables:
        assert rows, f"{name}: a table without rows: {header}"
        assert header[-1] == "steal %", header
        sides = [i for i, column in enumerate(header) if column.endswith(" CPU s")]
        assert sides, f"{name}: no CPU column in {header}"
        for row in rows:
            assert len(row) == len(header), (header, row)
            for i in sides:
                assert re.fullmatch(r"-|[\d,]+(\.\d+)?", row[i]), (header[i], row[i])
            assert any(row[i] != "-" and float(row[i].replace(",", "")) > 0 for i in sides), (
                f"{name}: no side used any CPU in {row}"
            )
