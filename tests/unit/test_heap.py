"""heap.HeapKeeper: survivors of a full collection are frozen, a dead frozen cycle is
reclaimed at the next thaw, pauses are counted, and uninstalling leaves the collector as
it was. Real ``gc``, no doubles: the keeper is only as good as what CPython does with it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from spark_offset_sidecar.heap import FULL, THRESHOLDS, HeapKeeper


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cycle:
    """A reference cycle: freed only by the cyclic collector, never by reference counts."""

    def __init__(self) -> None:
        self.me = self


def in_scanned_generations(obj: object) -> bool:
    return any(o is obj for generation in range(3) for o in gc.get_objects(generation))


@pytest.fixture
def keeper() -> Iterator[tuple[HeapKeeper, Clock]]:
    gc.unfreeze()
    clock = Clock()
    kept = HeapKeeper(thaw_every=60.0, clock=clock)
    kept.install()
    try:
        yield kept, clock
    finally:
        kept.uninstall()


def test_survivors_of_a_full_collection_are_frozen(keeper: tuple[HeapKeeper, Clock]) -> None:
    kept, _ = keeper
    assert kept.frozen > 0  # what was loaded at install
    young = Cycle()
    assert in_scanned_generations(young)
    gc.collect()
    assert not in_scanned_generations(young)
    assert kept.frozen > 0


def test_a_cycle_that_dies_frozen_is_reclaimed_at_the_next_thaw(
    keeper: tuple[HeapKeeper, Clock],
) -> None:
    kept, clock = keeper
    cycle = Cycle()
    gc.collect()  # frozen now
    dead = weakref.ref(cycle)
    del cycle
    gc.collect()
    assert dead() is not None, "a frozen cycle is not scanned before the thaw"
    assert kept.thaws == 0
    clock.now += 61.0
    gc.collect()
    assert dead() is None
    assert kept.thaws == 1
    assert kept.frozen > 0, "the survivors of the thawing collection are frozen again"


def test_a_young_collection_neither_freezes_nor_thaws(keeper: tuple[HeapKeeper, Clock]) -> None:
    kept, clock = keeper
    clock.now += 61.0
    young = Cycle()
    gc.collect(0)
    assert kept.thaws == 0
    assert in_scanned_generations(young)


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


@pytest.fixture
def nothing_frozen() -> int:
    """What the interpreter counts with nothing frozen: 0, but 375 on Python 3.12.1, whose
    collections leave objects counted in the permanent generation."""
    gc.unfreeze()
    gc.collect()
    return gc.get_freeze_count()


@pytest.fixture
def never_freezing() -> Iterator[HeapKeeper]:
    kept = HeapKeeper(thaw_every=0.0)
    kept.install()
    yield kept
    kept.uninstall()


def test_thaw_every_zero_never_freezes(nothing_frozen: int, never_freezing: HeapKeeper) -> None:
    gc.collect()
    assert never_freezing.frozen == nothing_frozen


def test_uninstall_leaves_the_collector_as_it_was() -> None:
    gc.unfreeze()
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
    assert gc.get_freeze_count() == 0


def test_settle_freezes_what_lives_now(keeper: tuple[HeapKeeper, Clock]) -> None:
    """The fleet's state just rebuilt is frozen at once: the young collections that come
    before the next full one no longer scan it."""
    kept, _ = keeper
    state = [Cycle() for _ in range(100)]
    assert all(in_scanned_generations(s) for s in state)
    kept.settle()
    assert not any(in_scanned_generations(s) for s in state)
    later = Cycle()  # made since: scanned as before
    gc.collect(0)
    assert in_scanned_generations(later)


def test_settle_freezes_nothing_unless_installed_and_freezing(
    nothing_frozen: int, never_freezing: HeapKeeper
) -> None:
    HeapKeeper().settle()  # not installed
    assert gc.get_freeze_count() == nothing_frozen
    never_freezing.settle()
    assert never_freezing.frozen == nothing_frozen
