"""Keeping CPython's cyclic garbage collector from holding the event loop.

A full collection scans every object the collector tracks. At 5,000 groups that is about
260,000 objects and 160-290 ms in which no event is answered; nearly all of them are the
fleet's state, which lives for hours and is never garbage when a collection looks at it.

    keeper = HeapKeeper(thaw_every=3600.0)
    keeper.install()      # once the process has loaded its state
    ...
    keeper.uninstall()    # at shutdown: the collector as it was

Invariants:

- The survivors of every full collection are frozen (``gc.freeze``): later collections do
  not scan them, so a full collection costs what was promoted since the last one, not
  the whole heap.
- A frozen object that dies is freed by its reference count like any other; only a
  reference cycle that dies while frozen is not. Every ``thaw_every`` seconds the next full
  collection first gives the frozen heap back (``gc.unfreeze``) and scans all of it, so
  such a cycle lives at most ``thaw_every`` plus one full collection, and that collection
  is the one long pause of the period. ``thaw_every=0`` never freezes.
- The callbacks run in whichever thread set off the collection, holding the GIL, between
  a collection's phases: there, freezing moves the same lists it moves anywhere else.
- Every collection's pause is counted per generation (collections, seconds, longest),
  read by the metrics at scrape time.
- ``settle`` freezes what lives when the process's long-lived state has just been
  replaced (the lag monitor's evaluation of the fleet, ``LagMonitor.settled``): the
  middle collections until the next one scan what was made since, not the fleet's
  tables (at 10,000 groups x 32 partitions they scanned them in 145-210 ms).

Standard library only.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GENERATIONS = 3
FULL = GENERATIONS - 1
# Requests allocate a lot and die young: collect the young generation less often than
# CPython's 700 (each such collection is cheap and short, the older ones are rarer).
# Measured alone in the process that takes events (bench/RECORD.md, "Three test workers;
# the heap keeper's thresholds alone"): against CPython's (700, 10, 10), 1.17x the events
# a second in a closed loop and a p99 of 21-22 ms against 79-103 ms. Making the middle
# generation small (2, 10) did not lower the events' p99 at 5,000 groups ("GC").
THRESHOLDS = (20_000, 20, 20)


@dataclass
class Pauses:
    """The collections of one generation since the keeper was installed."""

    collections: int = 0
    seconds: float = 0.0
    longest: float = 0.0


class HeapKeeper:
    def __init__(
        self,
        thaw_every: float = 3600.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.thaw_every = thaw_every
        self.pauses = tuple(Pauses() for _ in range(GENERATIONS))
        self.thaws = 0
        self._clock = clock
        self._started: float | None = None
        self._thawed_at = 0.0
        self._thresholds: tuple[int, int, int] | None = None

    @property
    def frozen(self) -> int:
        """Objects the collector does not scan (``gc.get_freeze_count``)."""
        return gc.get_freeze_count()

    def install(self) -> None:
        """Collect and freeze what is loaded now, then keep freezing after full collections."""
        if self._thresholds is not None:
            return
        self._thresholds = gc.get_threshold()
        gc.collect()
        if self.thaw_every > 0:
            gc.freeze()
        self._thawed_at = self._clock()
        gc.set_threshold(*THRESHOLDS)
        gc.callbacks.append(self._on_collection)

    def uninstall(self) -> None:
        if self._thresholds is None:
            return
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)
        gc.set_threshold(*self._thresholds)
        self._thresholds = None
        gc.unfreeze()

    def settle(self) -> None:
        """Freeze what lives now (the fleet's state, just rebuilt): not scanned again until
        the next thaw. Nothing while not installed or with ``thaw_every=0``."""
        if self._thresholds is not None and self.thaw_every > 0:
            gc.freeze()

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        now = self._clock()
        if phase == "start":
            self._started = now
            due = self.thaw_every > 0 and now - self._thawed_at >= self.thaw_every
            if generation == FULL and due:
                gc.unfreeze()  # this collection scans the whole heap once
                self._thawed_at = now
                self.thaws += 1
            return
        if generation == FULL and self.thaw_every > 0:
            gc.freeze()
        if self._started is not None:
            pause = now - self._started
            figures = self.pauses[generation]
            figures.collections += 1
            figures.seconds += pause
            figures.longest = max(figures.longest, pause)
            self._started = None
