"""The cyclic garbage collector in the process that takes events: collected less often,
and every pause counted.

Requests allocate a lot and die young. CPython collects the young generation every 700
allocations; the keeper sets ``THRESHOLDS`` instead (decision: docs/decisions.md,
"Garbage collector thresholds"), and counts every collection's pause per generation
(collections, seconds, longest), read by the metrics at scrape time (``sidecar_gc_*``).

    keeper = HeapKeeper()
    keeper.install()      # once, by the process (``cli``), never by an app
    ...
    keeper.uninstall()    # at shutdown: the collector as it was

The callbacks run in whichever thread set off the collection, holding the GIL. Standard
library only.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GENERATIONS = 3
THRESHOLDS = (20_000, 20, 20)


@dataclass
class Pauses:
    """The collections of one generation since the keeper was installed."""

    collections: int = 0
    seconds: float = 0.0
    longest: float = 0.0


class HeapKeeper:
    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.pauses = tuple(Pauses() for _ in range(GENERATIONS))
        self._clock = clock
        self._started: float | None = None
        self._thresholds: tuple[int, int, int] | None = None

    def install(self) -> None:
        if self._thresholds is not None:
            return
        self._thresholds = gc.get_threshold()
        gc.set_threshold(*THRESHOLDS)
        gc.callbacks.append(self._on_collection)

    def uninstall(self) -> None:
        if self._thresholds is None:
            return
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)
        gc.set_threshold(*self._thresholds)
        self._thresholds = None

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        now = self._clock()
        if phase == "start":
            self._started = now
            return
        if self._started is not None:
            pause = now - self._started
            figures = self.pauses[info["generation"]]
            figures.collections += 1
            figures.seconds += pause
            figures.longest = max(figures.longest, pause)
            self._started = None
