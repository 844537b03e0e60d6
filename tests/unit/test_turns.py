"""Sharing the event loop (``turns``): work hands the loop back once its budget has passed,
and readers that could ask back to back are let in at most so many a second, in turn."""

from __future__ import annotations

import asyncio

import pytest

from spark_offset_sidecar import turns
from spark_offset_sidecar.turns import Pace, Turns


class Time:
    """A clock that only the recorded sleeps move."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def time(monkeypatch: pytest.MonkeyPatch) -> Time:
    fake = Time()
    monkeypatch.setattr(turns.asyncio, "sleep", fake.sleep)
    return fake


def test_callers_go_in_turn_at_most_per_second(time: Time) -> None:
    pace = Pace(4, time.clock)

    async def five_at_once() -> None:
        for _ in range(5):
            await pace.turn()

    asyncio.run(five_at_once())
    # The first goes at once; each next waits its quarter of a second.
    assert time.slept == pytest.approx([0.25, 0.25, 0.25, 0.25])
    time.now += 10  # a caller long after the last turn goes at once
    asyncio.run(pace.turn())
    assert len(time.slept) == 4


def test_no_limit_never_waits(time: Time) -> None:
    pace = Pace(0, time.clock)
    for _ in range(100):
        asyncio.run(pace.turn())
    assert time.slept == []


def test_work_hands_the_loop_back_once_its_budget_has_passed(time: Time) -> None:
    work = Turns(budget=0.002, pause=0.001, clock=time.clock)

    async def steps() -> list[bool]:
        taken = []
        for _ in range(6):
            time.now += 0.001  # each step costs a millisecond
            taken.append(await work.take())
        return taken

    assert asyncio.run(steps()) == [False, True, False, True, False, True]
    assert work.yielded == 3
    assert time.slept == [0.001] * 3
