"""heap.HeapKeeper: the collector's thresholds set and every pause counted by generation,
and uninstalling leaves the collector as it was. Real ``gc``, no doubles: the keeper is
only as good as what CPython does with it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from spark_offset_sidecar.heap import THRESHOLDS, HeapKeeper

FULL = 2


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def keeper() -> Iterator[tuple[HeapKeeper, Clock]]:
    clock = Clock()
    kept = HeapKeeper(clock=clock)
    kept.install()
    try:
        yield kept, clock
    finally:
        kept.uninstall()


def test_pauses_are_counted_by_generation(keeper: tuple[HeapKeeper, Clock]) -> None:
    kept, clock = keeper
    before = kept.pauses[FULL].collections

    def collect_taking(seconds: float) -> None:
        start = gc.callbacks.index(kept._on_collection)

        # Move the clock between the keeper's "start" and "stop": a pause of ``seconds``.
        def tick(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                clock.now += seconds

        gc.callbacks.insert(start + 1, tick)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(tick)

    collect_taking(0.25)
    collect_taking(0.1)
    full = kept.pauses[FULL]
    assert full.collections == before + 2
    assert full.seconds >= 0.35
    assert full.longest == pytest.approx(0.25)


def test_uninstall_leaves_the_collector_as_it_was() -> None:
    thresholds = gc.get_threshold()
    callbacks = list(gc.callbacks)
    kept = HeapKeeper()
    kept.install()
    assert gc.get_threshold() == THRESHOLDS
    kept.install()  # a second install changes nothing
    assert gc.callbacks.count(kept._on_collection) == 1
    kept.uninstall()
    assert gc.get_threshold() == thresholds
    assert gc.callbacks == callbacks
