"""Every benchmark still runs: ``python -m bench --quick NAME`` for each scenario, as a
user would run it (the real service, Spark, wrk, PostgreSQL), printing its tables with the
CPU of each side. Its figures are not judged here (machines are shared and noisy): that it
runs end to end and prints them is. One scenario gets the brand-new broker the runner
starts when given none (``make bench``); the others are given this worker's broker
(``--bootstrap``, its pid for the broker's CPU column): a broker's start and stop is 8-10 s
of CPU, paid by every scenario that takes one otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.__main__ import SCENARIOS
from harness.kafka_broker import LocalBroker
from harness.machine import ROOT
from tests.support.bench_output import check_cpu_columns


def _marks(name: str) -> list[pytest.MarkDecorator]:
    scenario = SCENARIOS[name]
    marks = []
    if scenario.broker or scenario.own_broker:
        marks.append(pytest.mark.kafka)
    if "Spark" in scenario.needs:
        marks.append(pytest.mark.spark)
    if "PostgreSQL" in scenario.needs:
        marks.append(pytest.mark.tools)
    if name in LONG:
        marks.append(pytest.mark.long)
    return marks


# Quick runs of a minute or more on 2 cores (several sides, each loading its fleet).
LONG = {"scrape_cost", "replicas", "follow_latency", "peers"}


# The scenario run on the runner's own brand-new broker (what ``make bench`` does).
BRAND_NEW = "commit_scale"

# Scenarios whose full path (``python -m bench NAME``, its tables) a test of their own runs
# with more load and more checks: not run twice.
RUN_ELSEWHERE = {"soak": "tests/e2e/test_faults.py::test_soak_short_form"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=_marks(n)) for n in SCENARIOS if n not in RUN_ELSEWHERE]
)  # fmt: skip
def test_the_scenario_runs_and_prints_its_figures_with_each_sides_cpu(
    name: str, request: pytest.FixtureRequest
) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "BENCH_KAFKA_PID"}
    given: list[str] = []
    if SCENARIOS[name].broker and name != BRAND_NEW:
        broker: LocalBroker = request.getfixturevalue("broker")
        given = ["--bootstrap", broker.bootstrap]
        if broker.started_here:
            environment["BENCH_KAFKA_PID"] = str(broker.pid())
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", name, *given],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    check_cpu_columns(name, done.stdout)


def test_the_scenario_on_a_brand_new_broker_is_one_that_takes_a_broker() -> None:
    assert SCENARIOS[BRAND_NEW].broker


def test_a_scenario_run_elsewhere_is_run_there_through_the_runner() -> None:
    for name, test in RUN_ELSEWHERE.items():
        path, _, function = test.partition("::")
        source = (ROOT / path).read_text()
        assert f"def {function}(" in source, test
        assert f'"-m", "bench", "{name}"' in source, f"{test} does not run bench {name}"
